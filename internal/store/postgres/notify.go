package postgres

// eventsChannel is the LISTEN/NOTIFY channel on which each committed
// batch of appends announces "<last seq> <session id>" for each session
// it appended to, for the replicas that follow them.
const eventsChannel = "kerneld_events"

// signalsChannel carries the replicas' signals as JSON (see wireSignal).
const signalsChannel = "kerneld_signals"

// maxChannelBytes is the longest channel name Postgres keeps
// (NAMEDATALEN - 1); longer names are cut to it.
const maxChannelBytes = 63

// channel returns the name of channel kind for the store's schema, so
// deployments sharing a database do not hear each other.
func (s *Store) channel(kind string) string {
	c := kind + ":" + s.schema
	if len(c) > maxChannelBytes {
		c = c[:maxChannelBytes]
	}
	return c
}
