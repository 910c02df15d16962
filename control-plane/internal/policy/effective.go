package policy

import "time"

// Effective is a tenant's limits after defaults are applied. A nil bound is unlimited: the user
// wrote `unlimited` (or, in an override, did not narrow that limit).
type Effective struct {
	MaxMessageBytes   *uint64
	MessagesPerSecond *uint64
	BytesPerSecond    *uint64
	BurstMessages     *uint64
	BurstBytes        *uint64
	InFlight          *uint64
	QueueMaxMessages  *uint64
	QueueMaxWait      *time.Duration
	Connections       *uint64
	// The read side: record bytes received per second and the bucket's depth.
	ConsumeBytesPerSecond *uint64
	ConsumeBurstBytes     *uint64
	// NATS deliveries per second (a bucket of one second of them).
	ConsumeMessagesPerSecond *uint64
}

// Built-in defaults: the values a limit takes when neither the policy nor GatewayDefaults sets it.
// They are documented in docs/policy-reference.md; a test keeps the two in step.
var BuiltinDefaults = struct {
	MaxMessageBytes, MessagesPerSecond, BytesPerSecond, InFlight, QueueMaxMessages, Connections uint64
	ConsumeBytesPerSecond, ConsumeMessagesPerSecond                                             uint64
	QueueMaxWait                                                                                time.Duration
}{
	MaxMessageBytes:   1 << 20,
	MessagesPerSecond: 10000,
	BytesPerSecond:    64 << 20,
	InFlight:          1000,
	QueueMaxMessages:  1000,
	QueueMaxWait:      time.Second,
	Connections:       1000,
	// As much as a tenant may send by default: a tenant replaying a topic takes no more of the
	// brokers than one producing at its default rate.
	ConsumeBytesPerSecond: 64 << 20,
	// Ten times what a tenant may publish by default: its subscribers receive what many
	// publishers send.
	ConsumeMessagesPerSecond: 100000,
}

// source says where a resolved value came from, for error messages.
type source struct {
	pos   Pos
	field string
}

type resolved struct {
	value *uint64
	from  source
}

// pick resolves one quantity: the policy's value, else the defaults', else the built-in one.
func pick(own, dflt Quantity, builtin *uint64, ownField, dfltField string, fallback source) resolved {
	for _, c := range []struct {
		q     Quantity
		field string
	}{{own, ownField}, {dflt, dfltField}} {
		if c.q.Set {
			if c.q.Unlimited {
				return resolved{nil, source{c.q.Pos, c.field}}
			}
			v := c.q.Value
			return resolved{&v, source{c.q.Pos, c.field}}
		}
	}
	return resolved{builtin, fallback}
}

func ptr[T any](v T) *T { return &v }

// Resolve applies GatewayDefaults and the built-in defaults to a tenant's limits and checks
// the rules that involve more than one field.
func resolve(own Limits, ownPath string, ownPos Pos, dflt Limits, c *collector) Effective {
	fb := source{ownPos, ownPath}
	f := func(sub string) string { return ownPath + "." + sub }
	d := func(sub string) string { return "spec.defaultLimits." + sub }
	b := BuiltinDefaults

	maxMsg := pick(own.MaxMessageBytes, dflt.MaxMessageBytes, ptr(b.MaxMessageBytes), f("maxMessageBytes"), d("maxMessageBytes"), fb)
	mps := pick(own.Rate.MessagesPerSecond, dflt.Rate.MessagesPerSecond, ptr(b.MessagesPerSecond), f("rate.messagesPerSecond"), d("rate.messagesPerSecond"), fb)
	bps := pick(own.Rate.BytesPerSecond, dflt.Rate.BytesPerSecond, ptr(b.BytesPerSecond), f("rate.bytesPerSecond"), d("rate.bytesPerSecond"), fb)
	burstMsg := pick(own.Rate.BurstMessages, dflt.Rate.BurstMessages, mps.value, f("rate.burstMessages"), d("rate.burstMessages"), mps.from)
	burstBytes := pick(own.Rate.BurstBytes, dflt.Rate.BurstBytes, bps.value, f("rate.burstBytes"), d("rate.burstBytes"), bps.from)
	inFlight := pick(own.InFlight, dflt.InFlight, ptr(b.InFlight), f("inFlight"), d("inFlight"), fb)
	qMax := pick(own.Queue.MaxMessages, dflt.Queue.MaxMessages, ptr(b.QueueMaxMessages), f("queue.maxMessages"), d("queue.maxMessages"), fb)
	conns := pick(own.Connections, dflt.Connections, ptr(b.Connections), f("connections"), d("connections"), fb)
	consumeBps := pick(own.Consume.BytesPerSecond, dflt.Consume.BytesPerSecond, ptr(b.ConsumeBytesPerSecond), f("consume.bytesPerSecond"), d("consume.bytesPerSecond"), fb)
	consumeBurst := pick(own.Consume.BurstBytes, dflt.Consume.BurstBytes, consumeBps.value, f("consume.burstBytes"), d("consume.burstBytes"), consumeBps.from)
	consumeMps := pick(own.Consume.MessagesPerSecond, dflt.Consume.MessagesPerSecond, ptr(b.ConsumeMessagesPerSecond), f("consume.messagesPerSecond"), d("consume.messagesPerSecond"), fb)

	e := Effective{
		MaxMessageBytes:   maxMsg.value,
		MessagesPerSecond: mps.value,
		BytesPerSecond:    bps.value,
		InFlight:          inFlight.value,
		QueueMaxMessages:  qMax.value,
		Connections:       conns.value,

		ConsumeMessagesPerSecond: consumeMps.value,
	}
	if consumeBps.value != nil {
		e.ConsumeBytesPerSecond, e.ConsumeBurstBytes = consumeBps.value, consumeBurst.value
	}
	if mps.value != nil {
		e.BurstMessages = burstMsg.value
	}
	if bps.value != nil {
		e.BurstBytes = burstBytes.value
	}
	switch {
	case own.Queue.MaxWait.Set:
		e.QueueMaxWait = spanPtr(own.Queue.MaxWait)
	case dflt.Queue.MaxWait.Set:
		e.QueueMaxWait = spanPtr(dflt.Queue.MaxWait)
	default:
		e.QueueMaxWait = ptr(b.QueueMaxWait)
	}

	atLeastOne := func(r resolved, what string) {
		if r.value != nil && *r.value == 0 {
			c.add(r.from.pos, r.from.field, "%s must be at least 1 (write %q to remove the limit)", what, unlimited)
		}
	}
	atLeastOne(maxMsg, "maxMessageBytes")
	atLeastOne(mps, "messagesPerSecond")
	atLeastOne(bps, "bytesPerSecond")
	atLeastOne(inFlight, "inFlight")
	atLeastOne(conns, "connections")
	atLeastOne(consumeBps, "consume.bytesPerSecond")
	atLeastOne(consumeMps, "consume.messagesPerSecond")
	if e.ConsumeBurstBytes != nil && (own.Consume.BurstBytes.Set || dflt.Consume.BurstBytes.Set) {
		atLeastOne(consumeBurst, "consume.burstBytes")
	}
	if e.BurstMessages != nil {
		atLeastOne(burstMsg, "burstMessages")
	}
	if e.BurstBytes != nil {
		checkBurstFitsMessage(burstBytes, maxMsg, c)
	}
	return e
}

// checkBurstFitsMessage rejects a byte bucket too shallow for one message of the maximum size:
// such a message could never be admitted.
func checkBurstFitsMessage(burst, maxMsg resolved, c *collector) {
	switch {
	case burst.value == nil:
	case maxMsg.value == nil:
		c.add(burst.from.pos, burst.from.field,
			"burstBytes is %d but maxMessageBytes is unlimited: a larger message could never be admitted", *burst.value)
	case *burst.value < *maxMsg.value:
		c.add(burst.from.pos, burst.from.field,
			"burstBytes (%d) is smaller than maxMessageBytes (%d): a message of the maximum size could never be admitted",
			*burst.value, *maxMsg.value)
	}
}

func spanPtr(s Span) *time.Duration {
	if s.Unlimited {
		return nil
	}
	return ptr(s.Value)
}
