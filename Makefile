# The two commands a newcomer needs (see README.md):
#   make run   installs what is missing, builds, and starts `nekro serve`
#   make test  installs what is missing and runs every test
#   make examples  builds bin/nekro-examples: nekro with the document
#              examples (my_sum_function, ...) for trying it out; never
#              for production
GO ?= go
BIN ?= bin/nekro
# What `nekro version` prints: the checkout's description and commit, and
# when this build was made.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
CLI := github.com/nekro-go/nekro/internal/cli
LDFLAGS := -X $(CLI).version=$(VERSION) -X $(CLI).commit=$(COMMIT) -X $(CLI).buildDate=$(BUILD_DATE)

.PHONY: run test build examples deps bench vet

deps:
	@./scripts/deps.sh

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/nekro

examples:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/nekro-examples ./cmd/nekro-examples

run: deps build
	$(BIN) serve

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

test:
	@./scripts/test.sh

bench: deps build
	$(BIN) bench
