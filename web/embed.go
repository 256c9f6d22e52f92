// Package web holds kerneld's browser console: plain HTML, CSS and ES
// modules with no build step, embedded in the binary and served by
// internal/httpapi at / (index.html) and /console/{file} (the rest).
// The console is a client of the public API and nothing more: every
// action it offers is an API request a script could make.
package web

import "embed"

// Console holds the console's files under console/.
//
//go:embed console
var Console embed.FS
