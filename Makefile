# signalbox — build and test.
GO        ?= go
BIN       ?= bin/signalbox
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/signalbox/signalbox/internal/app.Version=$(VERSION)

.PHONY: all build test test-unit vet fmt bench web clean package

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/signalbox

# make test: installs and starts what the tests need (PostgreSQL, xmllint,
# kcat, tshark, Chromium, Prometheus, net-snmp) on Debian, then runs every
# test: with the race detector against both store backends, and, at the same
# time, without it, the packages that drive the binary (app, docs, bench),
# the allocation tests and the director's multi-process node tests.
# scripts/test.sh says how, phase by phase.
test:
	./scripts/test.sh

# make test-unit: the fast loop for developers. Needs nothing but Go: -short
# leaves out the tests that talk to PostgreSQL, tshark, kcat or Chromium
# (testkit.Outside), the director's multi-process node tests and its runs on
# librdkafka's mock cluster, which make test always runs.
test-unit:
	$(GO) vet ./...
	$(GO) test -short -timeout 5m ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# make web: refreshes the vendored front-end library (uPlot) from the npm
# registry; the result is committed, so builds need no npm.
web:
	./scripts/web-vendor.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

# make package: the Debian package (dist/signalbox_<version>_amd64.deb): the
# binary, a systemd unit running it as the unprivileged user signalbox with
# its data in /var/lib/signalbox, /etc/signalbox/signalbox.yaml, and the
# deploy/ files under /usr/share/signalbox. nfpm is pinned in go.mod.
PKG_VERSION ?= $(or $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null | sed 's/^v//'),0.0.0+g$(shell git rev-parse --short HEAD 2>/dev/null))

package: build
	mkdir -p dist
	SIGNALBOX_VERSION=$(PKG_VERSION) $(GO) tool nfpm package -p deb -f deploy/debian/nfpm.yaml -t dist/

clean:
	rm -rf bin dist .test-deps.out .test-deps.log .test-race.json .test-e2e.json .test-norace.json .test-vet.log
