package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/redisstore"
)

// TestAdminErrorNamesAPermission answers an admin call that Redis refused
// for want of a permission with that cause, not with "did not answer".
func TestAdminErrorNamesAPermission(t *testing.T) {
	w := httptest.NewRecorder()
	err := fmt.Errorf("ratekit: Reset: %w to PUBLISH on channel %q", redisstore.ErrNoPermission, redisstore.ResetChannel)
	adminError(w, err, slog.New(slog.NewTextHandler(io.Discard, nil)))
	body := w.Body.String()
	if w.Code != http.StatusInternalServerError || !strings.Contains(body, "lacks a permission") || !strings.Contains(body, "PUBLISH") {
		t.Errorf("%d %q, want 500 naming the missing permission", w.Code, body)
	}
}
