# The two commands a newcomer needs (see README.md):
#   make run   installs what is missing, builds, and starts `nekro serve`
#   make test  installs what is missing and runs every test
GO ?= go
BIN := bin/nekro

.PHONY: run test build deps bench vet

deps:
	@./scripts/deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/nekro

run: deps build
	$(BIN) serve

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

test:
	@./scripts/test.sh

bench: deps build
	$(BIN) bench
