// Command weighstation is the control plane: `serve` runs it, `validate` checks a policy
// directory (for CI), `bootstrap` prints the Envoy bootstrap that points Envoy at it, `quota`
// serves global tenants' shares.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const commands = `usage: weighstation <command> [flags]

commands:
  serve       load and watch policies, serve xDS to Envoy, status over HTTP
  validate    DIR: check a policy directory; exit 1 and print every error on any problem
  bootstrap   print the Envoy bootstrap (JSON) that connects Envoy to this control plane
  quota       serve global tenants' shares to the gateway replicas, kept in Redis/Valkey
  decisions   print the gateway's refusals and long delays (JSON lines); --follow, --tenant, ...
  top         every tenant's traffic against its limits, across the gateway replicas, live
  usage       export: per-tenant, per-minute usage for chargeback (CSV, JSON lines, Parquet)
  impact      replay recorded usage against proposed policies: who would be refused or delayed
  drain       the Envoy pod's drain sidecar: at SIGTERM, drain Envoy's listeners through its admin
  check       dial the gateway as a client and see a limit refuse it (the chart's helm test)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, commands)
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "serve":
		code = serve(os.Args[2:])
	case "validate":
		code = validate(os.Args[2:], os.Stdout, os.Stderr)
	case "bootstrap":
		code = bootstrapCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "quota":
		code = quotaCmd(os.Args[2:])
	case "decisions":
		code = decisionsCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "top":
		code = topCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "usage":
		code = usageCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "impact":
		code = impactCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "drain":
		code = drainCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "check":
		code = checkCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "-h", "-help", "--help", "help":
		fmt.Print(commands)
	default:
		fmt.Fprintf(os.Stderr, "weighstation: unknown command %q\n%s", os.Args[1], commands)
		code = 2
	}
	os.Exit(code)
}

// parseFailed is a command's exit code when its flags did not parse: 0 when help was asked for
// (the flag package printed it), 2 for a usage error (the flag package printed the error).
func parseFailed(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}
