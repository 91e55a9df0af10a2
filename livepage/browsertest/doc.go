// Package browsertest drives the live page in a real browser: Debian's
// chromium, headless, through chromedp, against an example app on a real
// redis-server. It is a module of its own, so that the browser driver
// never enters the graph of a user of package livepage.
package browsertest
