# kerneld — see README.md. Every target works on a fresh clone with Go 1.26;
# Node 20+ (optional) enables the AG-UI conformance and reference MCP server
# tests and the API lint.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GOLANGCI_LINT_VERSION ?= v2.15.0

.PHONY: build run cluster test test-integration test-examples lint lint-api bench loadtest soak golden check agui aisdk mcp webhooks browser screenshot testdeps docker clean

build:
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/kerneld ./cmd/kerneld

run:
	go run -ldflags "$(LDFLAGS)" ./cmd/kerneld -config configs/kerneld.yaml

# agui installs the official AG-UI packages the conformance tests use, when
# npm is available; without it, or offline, those tests skip and say why
# (.ci/run installs them itself and requires them).
agui:
	@if command -v npm >/dev/null 2>&1; then \
		[ -d test/agui/node_modules/@ag-ui/client ] || npm ci --prefix test/agui --no-audit --no-fund --loglevel=error \
			|| echo "npm ci failed (offline?): AG-UI conformance tests will be skipped"; \
	else echo "npm not found: AG-UI conformance tests will be skipped"; fi

# aisdk installs the Vercel AI SDK (`ai`) the AI SDK route's tests drive
# kerneld with, when npm is available; without it, or offline, those
# tests skip and say why (.ci/run requires them).
aisdk:
	@if command -v npm >/dev/null 2>&1; then \
		[ -d test/aisdk/node_modules/ai ] || npm ci --prefix test/aisdk --no-audit --no-fund --loglevel=error \
			|| echo "npm ci failed (offline?): AI SDK tests will be skipped"; \
	else echo "npm not found: AI SDK tests will be skipped"; fi

# mcp installs the reference MCP server (server-everything) the
# MCP tests run, when npm is available; without it, or offline, those tests
# skip and say why.
mcp:
	@if command -v npm >/dev/null 2>&1; then \
		[ -d test/mcp/node_modules/@modelcontextprotocol/server-everything ] || npm ci --prefix test/mcp --no-audit --no-fund --loglevel=error \
			|| echo "npm ci failed (offline?): reference MCP server tests will be skipped"; \
	else echo "npm not found: reference MCP server tests will be skipped"; fi

# webhooks installs the Standard Webhooks reference verifier (npm
# standardwebhooks) that checks kerneld's webhook signatures, when npm is
# available; without it, or offline, that test skips and says why.
webhooks:
	@if command -v npm >/dev/null 2>&1; then \
		[ -d test/webhooks/node_modules/standardwebhooks ] || npm ci --prefix test/webhooks --no-audit --no-fund --loglevel=error \
			|| echo "npm ci failed (offline?): the webhook reference verifier test will be skipped"; \
	else echo "npm not found: the webhook reference verifier test will be skipped"; fi

# browser installs playwright-core for the web console's browser tests,
# when npm is available; never a browser: they use Debian's Chromium
# (apt-get install chromium). Without either, those tests skip and say why.
browser:
	@if command -v npm >/dev/null 2>&1; then \
		[ -d test/browser/node_modules/playwright-core ] || PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix test/browser --no-audit --no-fund --loglevel=error \
			|| echo "npm ci failed (offline?): browser tests will be skipped"; \
	else echo "npm not found: browser tests will be skipped"; fi

# screenshot rewrites docs/console.png, the README's picture of the console.
screenshot: browser
	go test -count=1 -run TestConsole_ReloadMidRun ./test/browser -update

# testdeps installs what the optional test suites need.
testdeps: agui aisdk mcp webhooks browser

test: testdeps
	go test -race -count=1 -timeout 30m ./...

# test-examples installs each example's npm packages (the CopilotKit
# example's are about 800 MB, so make test leaves the examples out) (examples/*/, when
# its lock file is newer than what is installed) and runs the examples'
# tests: browser tests in Debian's Chromium, never a downloaded browser.
# Without npm they skip and say why; .ci/run requires them.
test-examples:
	@if command -v npm >/dev/null 2>&1; then \
		for d in examples/*/; do \
			[ -f $$d/package-lock.json ] || continue; \
			[ $$d/node_modules/.package-lock.json -nt $$d/package-lock.json ] \
				|| PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 SCARF_ANALYTICS=false npm ci --prefix $$d --no-audit --no-fund --loglevel=error \
				|| { echo "npm ci failed in $$d (offline?)"; exit 1; }; \
		done; \
	else echo "npm not found: the examples' tests will be skipped"; fi
	go test -tags examples -race -count=1 -timeout 20m ./examples/...

test-integration: testdeps
	go test -race -count=1 -tags=integration ./...

lint:
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run --allow-parallel-runners

# lint-api lints api/openapi.yaml with Redocly and Spectral, pinned in
# test/apilint (with their rulesets), and fails on any error or warning.
# Both always run, and print their own messages: the line, the rule and
# a link to what it asks. The linters are installed with npm ci when
# missing or older than the lock file. Without npm it says so and skips;
# .ci/run requires it.
APILINT := test/apilint
lint-api:
	@if ! command -v npm >/dev/null 2>&1; then echo "npm not found: api/openapi.yaml not linted"; exit 0; fi; \
	if [ ! $(APILINT)/node_modules/.package-lock.json -nt $(APILINT)/package-lock.json ]; then \
		npm ci --prefix $(APILINT) --no-audit --no-fund --loglevel=error \
			|| { echo "npm ci failed (offline?): api/openapi.yaml not linted"; exit 1; }; \
	fi; \
	failed=; \
	echo "--- redocly lint (config $(APILINT)/redocly.yaml)"; \
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		$(APILINT)/node_modules/.bin/redocly lint --config $(APILINT)/redocly.yaml --lint-config=error \
		api/openapi.yaml || failed="$$failed redocly"; \
	echo "--- spectral lint (ruleset $(APILINT)/.spectral.yaml)"; \
	$(APILINT)/node_modules/.bin/spectral lint --ruleset $(APILINT)/.spectral.yaml --fail-severity=warn \
		--show-documentation-url api/openapi.yaml || failed="$$failed spectral"; \
	if [ -n "$$failed" ]; then echo "api/openapi.yaml does not lint clean:$$failed (see above)"; exit 1; fi

bench:
	go test -run '^$$' -bench . -benchmem ./...

# loadtest drives a real kerneld with fixed workloads and prints a Markdown
# table (docs/benchmarks.md): kerneld pinned to CPU 0 by the tool, the load
# generator on CPU 1. Built first: compiling under taskset would use one core.
# LOADTEST_ARGS='-base main' also measures main's build, interleaved.
loadtest: build
	CGO_ENABLED=0 go build -trimpath -o bin/loadtest ./cmd/loadtest
	@if command -v taskset >/dev/null 2>&1 && [ "$$(nproc --all)" -ge 2 ]; then \
		taskset -c 1 bin/loadtest $(LOADTEST_ARGS); \
	else echo "taskset not found or one CPU: the load generator runs unpinned"; bin/loadtest $(LOADTEST_ARGS); fi

# soak drives a mixed load (conversations with tools and reconnecting
# subscribers, cancels, busy posts, deletes) against a kerneld it starts
# on loopback, for 10 minutes by default, and fails on any 5xx, seq gap or
# duplicate, unfinished run, or memory, goroutines or descriptors not back
# near where they started. SOAK_ARGS='-short' (60 s) or '-duration 3m'.
soak: build
	CGO_ENABLED=0 go build -trimpath -o bin/loadtest ./cmd/loadtest
	bin/loadtest soak $(SOAK_ARGS)

golden:
	go test ./internal/httpapi -run Golden -update

check: testdeps
	go mod tidy -diff
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	go vet ./...
	go test -race -count=1 ./...

# cluster runs one Redis and three replicas on loopback (deploy/cluster.sh),
# the topology of deploy/compose.yaml without Docker; STORE=postgres runs
# the three on the local PostgreSQL instead.
STORE ?= redis
cluster: build
	STORE=$(STORE) deploy/cluster.sh

docker:
	docker build --build-arg VERSION=$(VERSION) -t kerneld:$(VERSION) -t kerneld:latest .

clean:
	rm -rf bin data
