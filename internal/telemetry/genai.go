package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// The spans kerneld starts, named as the OpenTelemetry GenAI semantic
// conventions (semconv v1.40.0) name them where they have a name: the
// operation, then what it acts on.

// RunSpanName names the span of one run of agent, from accept to end.
func RunSpanName(agent string) string { return "invoke_agent " + agent }

// ChatSpanName names the span of one model call.
func ChatSpanName(model string) string { return "chat " + model }

// ToolSpanName names the span of one tool call.
func ToolSpanName(tool string) string { return "execute_tool " + tool }

// Span names with no GenAI convention: time a run spends waiting.
const (
	QueueWaitSpanName    = "kerneld.queue_wait"    // a queued run waiting for the session's active one
	ApprovalWaitSpanName = "kerneld.approval_wait" // a tool call waiting for a person's decision
	GuardSpanName        = "kerneld.guard"         // a guard's call
)

// RunAttrs are a run span's attributes.
func RunAttrs(agent, sessionID, runID, tenant string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName(agent), semconv.GenAIConversationID(sessionID),
		attribute.String("kerneld.run.id", runID), attribute.String("kerneld.tenant", tenant),
	}
}

// ChatAttrs are a model call's attributes known before it starts.
func ChatAttrs(provider, model string) []attribute.KeyValue {
	return []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(provider),
		semconv.GenAIRequestModel(model)}
}

// UsageAttrs are a model call's (or a run's) tokens and why it stopped.
func UsageAttrs(inputTokens, outputTokens int64, finishReasons ...string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.GenAIUsageInputTokens(int(inputTokens)), semconv.GenAIUsageOutputTokens(int(outputTokens))}
	if len(finishReasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(finishReasons...))
	}
	return attrs
}

// ToolAttrs are a tool call's attributes.
func ToolAttrs(name, callID string) []attribute.KeyValue {
	return []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(name), semconv.GenAIToolCallID(callID)}
}

// Content returns the attribute key=value when t records message content
// (prompts, answers, tool arguments and results), and none otherwise.
func (t *Tracing) Content(key attribute.Key, value string) []attribute.KeyValue {
	if !t.recordContent {
		return nil
	}
	return []attribute.KeyValue{key.String(value)}
}

// The content attributes of the GenAI conventions that Content takes.
const (
	InputMessagesKey  = semconv.GenAIInputMessagesKey
	OutputMessagesKey = semconv.GenAIOutputMessagesKey
	ToolArgumentsKey  = semconv.GenAIToolCallArgumentsKey
	ToolResultKey     = semconv.GenAIToolCallResultKey
)
