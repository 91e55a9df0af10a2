// Package layers holds no code: its test checks that the library's import
// arrows point one way, down the layers docs/ARCHITECTURE.md lists.
package layers
