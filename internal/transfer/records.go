package transfer

import (
	"github.com/kerneld/kerneld/internal/schedule"
	"github.com/kerneld/kerneld/internal/session"
)

// The conversions between the stores' types and the dump's records. A
// test checks that each record carries every field of its type, so a
// field added to a type cannot be left out of dumps unnoticed.

func toSessionRecord(s session.Session) sessionRecord {
	ext := s.SessionExt
	ext.Imported = nil // an import marks its sessions itself
	return sessionRecord{
		Kind: kindSession, ID: s.ID, Tenant: s.Tenant, Agent: s.Agent, Name: s.Name,
		Metadata: s.Metadata, State: string(s.State), ParentID: s.ParentID, RootID: s.RootID,
		Depth: s.Depth, CreatedAt: micro(s.CreatedAt), UpdatedAt: micro(s.UpdatedAt),
		LastSeq: s.LastSeq, ActiveRunID: s.ActiveRunID, TTL: s.TTL, ExpiresAt: micro(s.ExpiresAt),
		InheritMemory: s.InheritMemory, ForkedFrom: s.ForkedFrom, Version: s.Version, Ext: ext,
	}
}

func (r *sessionRecord) session() session.Session {
	return session.Session{
		ID: r.ID, Tenant: r.Tenant, Agent: r.Agent, Name: r.Name, Metadata: r.Metadata,
		State: session.State(r.State), ParentID: r.ParentID, RootID: r.RootID, Depth: r.Depth,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LastSeq: r.LastSeq,
		ActiveRunID: r.ActiveRunID, TTL: r.TTL, ExpiresAt: r.ExpiresAt,
		InheritMemory: r.InheritMemory, ForkedFrom: r.ForkedFrom, Version: r.Version,
		SessionExt: r.Ext,
	}
}

func toRunRecord(r session.Run) runRecord {
	var rerr *runErrorRecord
	if r.Error != nil {
		rerr = &runErrorRecord{Code: r.Error.Code, Message: r.Error.Message}
	}
	return runRecord{
		Kind: kindRun, ID: r.ID, SessionID: r.SessionID, State: string(r.State), Input: r.Input,
		IdempotencyKey: r.IdempotencyKey, CreatedAt: micro(r.CreatedAt),
		StartedAt: micro(r.StartedAt), EndedAt: micro(r.EndedAt), Error: rerr,
		InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
		StartSeq: r.StartSeq, EndSeq: r.EndSeq, Version: r.Version, Ext: r.RunExt,
	}
}

func (r *runRecord) run() session.Run {
	var rerr *session.RunError
	if r.Error != nil {
		rerr = &session.RunError{Code: r.Error.Code, Message: r.Error.Message}
	}
	return session.Run{
		ID: r.ID, SessionID: r.SessionID, State: session.RunState(r.State), Input: r.Input,
		IdempotencyKey: r.IdempotencyKey, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt,
		EndedAt: r.EndedAt, Error: rerr,
		Usage:    session.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens},
		StartSeq: r.StartSeq, EndSeq: r.EndSeq, Version: r.Version, RunExt: r.Ext,
	}
}

func toMessageRecord(m session.Message) messageRecord {
	var calls []toolCallRecord
	for _, c := range m.ToolCalls {
		calls = append(calls, toolCallRecord(c))
	}
	return messageRecord{
		Kind: kindMessage, SessionID: m.SessionID, Position: m.Position, ID: m.ID, RunID: m.RunID,
		Role: string(m.Role), Content: m.Content, Images: m.Images, ToolCalls: calls,
		ToolCallID: m.ToolCallID, IsError: m.IsError, Compaction: m.Compaction,
		CreatedAt: micro(m.CreatedAt), Agent: m.Agent,
	}
}

func (r *messageRecord) message() session.Message {
	var calls []session.ToolCall
	for _, c := range r.ToolCalls {
		calls = append(calls, session.ToolCall(c))
	}
	return session.Message{
		ID: r.ID, SessionID: r.SessionID, Position: r.Position, RunID: r.RunID,
		Role: session.Role(r.Role), Content: r.Content, Images: r.Images, ToolCalls: calls,
		ToolCallID: r.ToolCallID, IsError: r.IsError, Compaction: r.Compaction,
		CreatedAt: r.CreatedAt, Agent: r.Agent,
	}
}

func toMemoryRecord(e session.MemoryEntry) memoryRecord {
	raw, b64 := splitJSON(e.Value)
	return memoryRecord{Kind: kindMemory, SessionID: e.SessionID, Key: e.Key, Value: raw,
		ValueB64: b64, UpdatedAt: micro(e.UpdatedAt)}
}

func (r *memoryRecord) entry() session.MemoryEntry {
	return session.MemoryEntry{SessionID: r.SessionID, Key: r.Key,
		Value: joinJSON(r.Value, r.ValueB64), UpdatedAt: r.UpdatedAt}
}

func toImageRecord(sessionID string, img session.Image) imageRecord {
	return imageRecord{Kind: kindImage, SessionID: sessionID, Tenant: img.Tenant, Hash: img.Hash,
		MediaType: img.MediaType, Size: img.Size, Data: img.Data, CreatedAt: micro(img.CreatedAt)}
}

func (r *imageRecord) image() session.Image {
	return session.Image{Tenant: r.Tenant, Hash: r.Hash, MediaType: r.MediaType, Size: r.Size,
		Data: r.Data, CreatedAt: r.CreatedAt}
}

func toScheduleRecord(s schedule.Schedule) scheduleRecord {
	return scheduleRecord{
		Kind: kindSchedule, SessionID: s.SessionID, ID: s.ID, Tenant: s.Tenant, At: micro(s.At),
		Every: s.Every, Input: s.Input, IfBusy: s.IfBusy, NextAt: micro(s.NextAt),
		CreatedAt: micro(s.CreatedAt), Fired: s.Fired, Last: s.Last,
	}
}

func (r *scheduleRecord) schedule() schedule.Schedule {
	return schedule.Schedule{
		ID: r.ID, Tenant: r.Tenant, SessionID: r.SessionID, At: r.At, Every: r.Every,
		Input: r.Input, IfBusy: r.IfBusy, NextAt: r.NextAt, CreatedAt: r.CreatedAt,
		Fired: r.Fired, Last: r.Last,
	}
}

func toEventRecord(e session.Event) eventRecord {
	data, data64 := splitJSON(e.Data)
	meta, meta64 := splitJSON(e.Meta)
	return eventRecord{
		Kind: kindEvent, SessionID: e.SessionID, Seq: e.Seq, RunID: e.RunID, Type: string(e.Type),
		Time: micro(e.Time), Data: data, DataB64: data64, Meta: meta, MetaB64: meta64,
	}
}

func (r *eventRecord) event() session.Event {
	return session.Event{
		Seq: r.Seq, SessionID: r.SessionID, RunID: r.RunID, Type: session.EventType(r.Type),
		Time: r.Time, Data: joinJSON(r.Data, r.DataB64), Meta: joinJSON(r.Meta, r.MetaB64),
	}
}
