package webhook

import (
	"context"
	"fmt"
)

// Announcer is what the kernel announces through: it turns announcements
// into deliveries and writes them to the outbox, and wakes the dispatcher
// once what they announce is durable.
type Announcer struct {
	Targets    *Targets
	Outbox     Outbox
	Dispatcher *Dispatcher // nil: deliveries wait for a dispatcher's next poll
}

// CheckSessionEndpoints validates the endpoints a session of tenant names
// at creation (see Targets.CheckSessionEndpoints).
func (a *Announcer) CheckSessionEndpoints(tenant string, es []Endpoint) error {
	return a.Targets.CheckSessionEndpoints(tenant, es)
}

// Announce writes the deliveries of as to the outbox, durably, and returns
// how many it wrote. Announcing the same facts again writes nothing new
// (see Announcement.Key).
func (a *Announcer) Announce(ctx context.Context, as ...Announcement) (int, error) {
	var all []Delivery
	for _, an := range as {
		ds, err := a.Targets.Deliveries(an)
		if err != nil {
			return 0, err
		}
		all = append(all, ds...)
	}
	if len(all) == 0 {
		return 0, nil
	}
	if err := a.Outbox.AddDeliveries(ctx, all...); err != nil {
		return 0, fmt.Errorf("write webhook deliveries: %w", err)
	}
	return len(all), nil
}

// Notify tells the dispatcher that announced deliveries may go now.
func (a *Announcer) Notify() {
	if a.Dispatcher != nil {
		a.Dispatcher.Notify()
	}
}
