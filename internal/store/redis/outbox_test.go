package redis_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/redis/redistest"
	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/outboxtest"
)

func TestOutbox(t *testing.T) {
	redistest.Require(t)
	outboxtest.Run(t, func(t *testing.T) webhook.Outbox { return mustOpen(t, redistest.Use(t)) })
}
