//go:build linux

package gatewaytest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// traefikModule is the module that pins Traefik (traefik/go.mod): it
// requires github.com/traefik/traefik/v3 and repeats Traefik's own replace
// and exclude lines, which go install refuses.
func traefikModule() string {
	return filepath.Join(Root(), "cmd", "ratekit-server", "gatewaytest", "traefik")
}

// TraefikVersion returns the version of Traefik that traefik/go.mod
// requires.
func TraefikVersion() (string, error) {
	f, err := os.Open(filepath.Join(traefikModule(), "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "github.com/traefik/traefik/v3 v3.6.12" in a require block, or
		// after "require" on a line of its own
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == "github.com/traefik/traefik/v3" {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s: github.com/traefik/traefik/v3 is not required", f.Name())
}

// TraefikBinary returns the path of the traefik binary built from the
// module traefik/go.mod pins, built when missing. Built once (about ten
// minutes of two cores, 3 GB of memory), it is kept, as the go command
// keeps its build cache, under the user's cache directory, keyed by
// Traefik's version and Go's: ratekit/traefik-<version>/<go version>/traefik.
// A lock file there makes concurrent callers wait for one build.
func TraefikBinary() (string, error) {
	version, err := TraefikVersion()
	if err != nil {
		return "", err
	}
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "ratekit", "traefik-"+version, strings.TrimSpace(string(goVersion)))
	bin := filepath.Join(dir, "traefik")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built while this caller waited
	}
	return bin, buildTraefik(bin)
}

// buildTraefik builds Traefik's command into bin, through a temporary
// file, so that an interrupted build leaves no binary behind.
func buildTraefik(bin string) error {
	tmp := bin + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, "github.com/traefik/traefik/v3/cmd/traefik")
	cmd.Dir = traefikModule()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build traefik: %v\n%s", err, out)
	}
	return os.Rename(tmp, bin)
}

// StartTraefik runs traefik in a directory of its own under dir with the
// static configuration static (traefik.yml) and the dynamic configuration
// dynamic, listening on addr: traefik --configFile traefik.yml. The static
// configuration's file provider reads /etc/traefik/dynamic.yml, as the
// guide's does: that path becomes the dynamic configuration's file in
// Traefik's directory. StartTraefik returns once Traefik answers 2xx on
// ready, a path its routers only serve once the dynamic configuration is
// loaded.
func StartTraefik(bin, dir, name, addr, static, dynamic, ready string) (*Proc, error) {
	home := filepath.Join(dir, name)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	dynamicPath := filepath.Join(home, "dynamic.yml")
	static, err := Substitute(static, "/etc/traefik/dynamic.yml", dynamicPath)
	if err != nil {
		return nil, fmt.Errorf("traefik's static configuration: %w", err)
	}
	file := filepath.Join(home, "traefik.yml")
	if err := os.WriteFile(dynamicPath, []byte(dynamic), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, []byte(static), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--configFile="+file)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	p := &Proc{Name: name, Addr: addr}
	if err := p.start(cmd); err != nil {
		return nil, err
	}
	if err := awaitRoute(p, "http://"+addr+ready); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// awaitRoute waits until url answers 2xx: Traefik listens before its file
// provider's routers are in place, and answers 404 until then.
func awaitRoute(p *Proc, url string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := c.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return nil
		}
		last = resp.Status
	}
	return fmt.Errorf("%s: %s does not answer 2xx within 30s (last: %s): %s", p.Name, url, last, p.Log())
}
