package sqlite_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/sqlite"
	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/outboxtest"
)

func TestOutbox(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) webhook.Outbox {
		return mustOpen(t, sqlite.Options{Path: tempPath(t)})
	})
}
