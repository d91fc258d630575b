// Package docs holds no product code: its test runs the shell examples of
// README.md and docs/*.md, in order, against a fresh signalbox serve, so an
// example that stops working fails make test (docs_test.go says how a block
// is marked not to run, to run in the background, or with the output it
// must show).
package docs
