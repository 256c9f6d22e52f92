// Package api holds kerneld's wire contract, api/openapi.yaml, embedded so
// the daemon can serve it and tests can check the routes against it.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document describing kerneld's HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte
