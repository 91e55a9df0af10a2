//go:build linux

package gatewaytest

import (
	"os"
	"os/exec"
	"path/filepath"
)

// StartCaddy runs Debian's caddy with caddyfile (listening on addr) in a
// directory of its own under dir, which holds its configuration, data and
// autosave: caddy run --config Caddyfile --adapter caddyfile.
func StartCaddy(dir, name, addr, caddyfile string) (*Proc, error) {
	bin, err := Look("caddy")
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, name)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(home, "Caddyfile")
	if err := os.WriteFile(file, []byte(caddyfile), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Dir = home
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
	}
	p := &Proc{Name: name, Addr: addr}
	if err := p.start(cmd); err != nil {
		return nil, err
	}
	return p, nil
}
