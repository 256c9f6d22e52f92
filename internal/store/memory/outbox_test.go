package memory_test

import (
	"testing"

	"github.com/kerneld/kerneld/internal/store/memory"
	"github.com/kerneld/kerneld/internal/webhook"
	"github.com/kerneld/kerneld/internal/webhook/outboxtest"
)

func TestOutbox(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) webhook.Outbox { return memory.New() })
}
