package redistest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// aclPage is the page that gives users the ACL line to copy, and aclLine
// the prefix of that line there.
const (
	aclPage = "docs/acl.md"
	aclLine = "ACL SETUSER "
)

// DocsACLLine returns the first line of docs/acl.md that begins with "ACL
// SETUSER ": the line users copy to make ratekit's user. It fails tb when
// the page has none.
func DocsACLLine(tb testing.TB) string {
	tb.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("redistest: cannot locate the repository")
	}
	path := filepath.Join(filepath.Dir(self), "..", "..", filepath.FromSlash(aclPage))
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, aclLine) {
			return line
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	tb.Fatalf("redistest: %s has no line beginning %q", aclPage, aclLine)
	return ""
}

// ApplyDocsACL runs the line of [DocsACLLine] on s, as it stands, through
// the default user, and returns the user it makes and that user's
// password (its ">" rule).
func ApplyDocsACL(tb testing.TB, s *Server) (user, password string) {
	tb.Helper()
	fields := strings.Fields(DocsACLLine(tb))
	user, password, err := aclUser(fields)
	if err != nil {
		tb.Fatal(err)
	}
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = f
	}
	if err := s.Client(tb).Do(tb.Context(), args...).Err(); err != nil {
		tb.Fatalf("redistest: %s: %v", strings.Join(fields, " "), err)
	}
	return user, password
}

// aclUser returns the user that the fields of an ACL SETUSER line make,
// and the password of its one ">" rule.
func aclUser(fields []string) (user, password string, err error) {
	if len(fields) < 3 || !strings.EqualFold(fields[0], "ACL") || !strings.EqualFold(fields[1], "SETUSER") {
		return "", "", fmt.Errorf("redistest: %q is no ACL SETUSER line", strings.Join(fields, " "))
	}
	for _, f := range fields[3:] {
		if p, ok := strings.CutPrefix(f, ">"); ok {
			if password != "" {
				return "", "", fmt.Errorf("redistest: %q sets two passwords", strings.Join(fields, " "))
			}
			password = p
		}
	}
	if password == "" {
		return "", "", fmt.Errorf("redistest: %q sets no password", strings.Join(fields, " "))
	}
	return fields[2], password, nil
}

// LoginAs returns a client option that logs in as user with password.
func LoginAs(user, password string) func(*redis.Options) {
	return func(o *redis.Options) { o.Username, o.Password = user, password }
}
