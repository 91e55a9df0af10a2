package fiberlimit_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// A body streamed by a writer after the handler returned is charged what
// the writer reported, once it is done: 150 lines of one unit each on a
// budget of 100 put the key in debt.
func TestChargedStream(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{Name: "tokens", Limit: core.PerMinute(100), Key: adaptertest.ClientKey()}
	app := fiber.New()
	app.Use(fiberlimit.MustNew(l, []core.Rule{rule}, fiberlimit.WithCharged("tokens")))
	app.Get("/", func(c *fiber.Ctx) error {
		c.Context().SetBodyStreamWriter(fiberlimit.StreamWriter(c, func(w *bufio.Writer, addCost func(int)) {
			for i := range 150 {
				fmt.Fprintf(w, "token %d\n", i)
				if w.Flush() != nil {
					return
				}
				addCost(1)
			}
		}))
		return nil
	})
	r := adaptertest.NewRequest(http.MethodGet, "/", "a")
	resp, err := app.Test(r, -1)
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	resp.Body.Close()
	if n := strings.Count(body.String(), "\n"); n != 150 {
		t.Fatalf("the stream sent %d lines, want 150", n)
	}
	adaptertest.RemainingBecomes(t, l, rule, "a", 0, true)
}
