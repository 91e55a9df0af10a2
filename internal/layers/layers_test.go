package layers_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ratekit/ratekit/"

// layers lists the library's packages from the bottom up. A package may
// import packages of the layers below its own, never of its own layer or
// above: the stores never import one another, core imports no store, and
// no adapter imports another.
var layers = [][]string{
	{"internal/storekey", "internal/rediserr", "internal/redisopt", "internal/tickctx", "internal/pipebatch"},
	{"internal/localstore"},
	{"core"},
	{"internal/storecheck", "internal/observe"},
	{"redisstore", "memorystore", "leasestore", "core/adapter", "keyfuncs", "outbound"},
	{"core/storetest", "inflight", "ruleconf", "promlimit", "otellimit"},
	{"nethttp", "ginlimit", "echolimit", "echo5limit", "fiberlimit", "fiber3limit", "grpclimit"},
}

// frameworks are the web frameworks' modules: core, keyfuncs and the stores
// import none, and an adapter imports exactly one (nethttp's is the
// standard library's net/http, which the others may import too).
var frameworks = []string{
	"github.com/gin-gonic/gin", "github.com/labstack/echo/v4", "github.com/labstack/echo/v5",
	"github.com/gofiber/fiber/v2", "github.com/gofiber/fiber/v3", "google.golang.org/grpc",
}

func TestImportsPointDown(t *testing.T) {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layerOf[p] = i
		}
	}
	for pkg, layer := range layerOf {
		imports := importsOf(t, pkg)
		var fws []string
		for _, imp := range imports {
			if fw := framework(imp); fw != "" && !slices.Contains(fws, fw) {
				fws = append(fws, fw)
			}
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			l, known := layerOf[dep]
			switch {
			case !known:
				t.Errorf("%s imports %s, which no layer lists", pkg, dep)
			case l >= layer:
				t.Errorf("%s (layer %d) imports %s (layer %d): arrows point down only", pkg, layer+1, dep, l+1)
			}
		}
		if len(fws) == 0 && pkg == "nethttp" && slices.Contains(imports, "net/http") {
			fws = []string{"net/http"}
		}
		switch adapter := layer == len(layers)-1; {
		case adapter && len(fws) != 1:
			t.Errorf("adapter %s imports frameworks %v, want exactly one", pkg, fws)
		case !adapter && len(fws) > 0:
			t.Errorf("%s imports frameworks %v, want none", pkg, fws)
		}
	}
}

// TestEveryPackageHasALayer: a new library package must be placed.
func TestEveryPackageHasALayer(t *testing.T) {
	root := filepath.Join("..", "..")
	listed := map[string]bool{}
	for _, l := range layers {
		for _, p := range l {
			listed[p] = true
		}
	}
	for _, dir := range []string{"core", "redisstore", "memorystore", "leasestore", "keyfuncs", "inflight", "ruleconf", "promlimit", "otellimit", "outbound"} {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range append(matches, filepath.Join(root, dir)) {
			rel, _ := filepath.Rel(root, m)
			rel = filepath.ToSlash(rel)
			p, err := build.ImportDir(m, 0)
			if err != nil || p.Name == "main" || strings.HasSuffix(p.Name, "_test") {
				continue
			}
			if !listed[rel] {
				t.Errorf("package %s is in no layer", rel)
			}
		}
	}
}

// importsOf returns the imports of pkg's non-test files.
func importsOf(t *testing.T, pkg string) []string {
	t.Helper()
	p, err := build.ImportDir(filepath.Join("..", "..", filepath.FromSlash(pkg)), 0)
	if err != nil {
		t.Fatalf("%s: %v", pkg, err)
	}
	return p.Imports
}

// framework returns the framework module imp belongs to, or "".
func framework(imp string) string {
	for _, fw := range frameworks {
		if imp == fw || strings.HasPrefix(imp, fw+"/") {
			return fw
		}
	}
	return ""
}
