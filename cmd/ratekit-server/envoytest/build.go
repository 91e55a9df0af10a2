//go:build linux

package envoytest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// moduleDir is this module's directory.
func moduleDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Binaries are the programs compared.
type Binaries struct {
	Envoy, EnvoyCheck, Ratekit string
}

// Build builds envoy's service and config checker from the module pinned
// in envoy/go.mod, and ratekit-server from this repository, into dir.
func Build(dir string) (Binaries, error) {
	b := Binaries{
		Envoy:      filepath.Join(dir, "envoy-ratelimit"),
		EnvoyCheck: filepath.Join(dir, "envoy-config-check"),
		Ratekit:    filepath.Join(dir, "ratekit-server"),
	}
	root := moduleDir()
	builds := []struct{ out, pkg, dir string }{
		{b.Envoy, "github.com/envoyproxy/ratelimit/src/service_cmd", filepath.Join(root, "envoy")},
		{b.EnvoyCheck, "github.com/envoyproxy/ratelimit/src/config_check_cmd", filepath.Join(root, "envoy")},
		{b.Ratekit, ".", filepath.Dir(root)},
	}
	for _, bl := range builds {
		cmd := exec.Command("go", "build", "-o", bl.out, bl.pkg)
		cmd.Dir = bl.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %v\n%s", bl.pkg, err, out)
		}
	}
	return b, nil
}
