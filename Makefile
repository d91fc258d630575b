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
# kcat, tshark, Chromium, Prometheus) on Debian, then runs every test with the race
# detector against both store backends, and in a pass without it the
# allocation tests and the director's multi-process node tests (TestNodes*:
# timing across processes, which the race detector would distort; they
# build only without it). vet runs with -race so that it compiles the
# dependencies once for the race pass; the pass without it, and vet of the
# files that build only without it, cover just the packages it tests
# (NORACE_PKGS): on a fresh machine each build of every dependency costs
# minutes.
NORACE_PKGS = $(shell git grep -lE '^func (Test[A-Za-z0-9_]*Alloc|TestNodes)' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|')

test:
	@./scripts/test-deps.sh > .test-deps.out || { echo "make test: scripts/test-deps.sh failed (its messages are above)" >&2; exit 1; }
	@gofmt_out=$$(gofmt -l $$(git ls-files '*.go')) && { [ -z "$$gofmt_out" ] || { echo "gofmt needed:"; echo "$$gofmt_out"; exit 1; }; }
	@long=$$(git ls-files '*.go' | grep -v '_test\.go$$' | xargs wc -l | awk '$$2 != "total" && $$1 > 700'); \
	  [ -z "$$long" ] || { echo "product files over 700 lines (split each along a job):"; echo "$$long"; exit 1; }
	$(GO) vet -race ./...
	$(GO) vet $(NORACE_PKGS)
	SIGNALBOX_TEST_POSTGRES_DSN="$$(tail -1 .test-deps.out)" $(GO) test -race -timeout 12m ./...
	$(GO) test -count=1 -timeout 12m -run 'Alloc|^TestNodes' $(NORACE_PKGS)

# make test-unit: the fast loop for developers. Needs nothing but Go: -short
# leaves out the tests that talk to PostgreSQL, tshark, kcat or Chromium
# (testkit.Outside), which make test always runs.
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
	rm -rf bin dist .test-deps.out
