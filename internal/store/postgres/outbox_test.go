package postgres_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/postgres/pgtest"
	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/outboxtest"
)

func TestOutbox(t *testing.T) {
	pgtest.Require(t)
	outboxtest.Run(t, func(t *testing.T) webhook.Outbox { return openStore(t) })
}
