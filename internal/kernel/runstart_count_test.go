package kernel_test

import (
	"context"

	"github.com/kerneld/kerneld/internal/session"
)

func (s *countingStore) StartRun(ctx context.Context, token int64, st *session.RunStart) error {
	s.writes.Add(1)
	return s.Store.StartRun(ctx, token, st)
}
