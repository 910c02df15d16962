package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/gatewaycheck"
)

// checkCmd dials the gateway as a client and sees a limit refuse it (the chart's helm test):
// NATS tells the default tenant's maxMessageBytes as max_payload and refuses one byte more;
// Kafka refuses a record of that size with MESSAGE_TOO_LARGE.
func checkCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	natsAddr := fs.String("nats", "", "host:port of the gateway's NATS listener (empty: not checked)")
	natsUser := fs.String("nats-user", "", "NATS user, where nats-server requires one (its password in $WEIGHSTATION_CHECK_NATS_PASSWORD)")
	kafkaAddr := fs.String("kafka", "", "host:port of the gateway's Kafka bootstrap listener (empty: not checked)")
	kafkaSize := fs.Int("kafka-bytes", 0, "the record size Kafka must refuse (default: NATS's max_payload + 1; needed without --nats)")
	timeout := fs.Duration("timeout", 30*time.Second, "for the whole check")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if *natsAddr == "" && *kafkaAddr == "" {
		fmt.Fprintln(stderr, "weighstation check: give --nats, --kafka or both")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	size := *kafkaSize
	if *natsAddr != "" {
		// A session the gateway ends before the server's INFO (no server reachable from it yet,
		// right after an install) is tried again, as a client reconnects, until the timeout;
		// each such try is reported.
		var maxPayload int
		var err error
		for {
			maxPayload, err = gatewaycheck.NATS(ctx, *natsAddr, *natsUser, os.Getenv("WEIGHSTATION_CHECK_NATS_PASSWORD"))
			if !errors.Is(err, gatewaycheck.ErrNoSession) || ctx.Err() != nil {
				break
			}
			fmt.Fprintf(stderr, "weighstation check: %v; trying again\n", err)
			time.Sleep(time.Second)
		}
		if err != nil {
			fmt.Fprintf(stderr, "weighstation check: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "nats %s: max_payload %d; a message of %d bytes was refused\n", *natsAddr, maxPayload, maxPayload+1)
		if size == 0 {
			size = maxPayload + 1
		}
	}
	if *kafkaAddr != "" {
		if size == 0 {
			fmt.Fprintln(stderr, "weighstation check: --kafka needs --nats or --kafka-bytes")
			return 2
		}
		if err := gatewaycheck.Kafka(ctx, *kafkaAddr, size); err != nil {
			fmt.Fprintf(stderr, "weighstation check: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "kafka %s: a record of %d bytes was refused (MESSAGE_TOO_LARGE)\n", *kafkaAddr, size)
	}
	return 0
}
