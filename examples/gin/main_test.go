package main

import (
	"testing"

	"github.com/ratekit/ratekit/examples/internal/apptest"
)

// The test binary doubles as the app: apptest starts it as a process.
func TestMain(m *testing.M) { apptest.Main(m, main) }

func TestRoutes(t *testing.T)      { apptest.TestRoutes(t) }
func TestSharedRedis(t *testing.T) { apptest.TestSharedRedis(t) }
func TestBadFlags(t *testing.T)    { apptest.CheckBadFlags(t) }
func TestMetrics(t *testing.T)     { apptest.TestMetrics(t) }
func TestLogin(t *testing.T)       { apptest.TestLogin(t) }
func TestAdmin(t *testing.T)       { apptest.TestAdmin(t) }
func TestLivePage(t *testing.T)    { apptest.TestLivePage(t) }
func TestReload(t *testing.T)      { apptest.TestReload(t) }
func TestPlans(t *testing.T)       { apptest.TestPlans(t) }
