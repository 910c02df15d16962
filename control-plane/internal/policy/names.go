package policy

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func isDNSLabel(s string) bool { return dnsLabel.MatchString(s) }

func itoa(i int) string { return strconv.Itoa(i) }

func sortStrings(s []string) { sort.Strings(s) }

// natsSubjectPatternError explains why s is not a NATS subject pattern, or returns "".
func natsSubjectPatternError(s string) string {
	if strings.ContainsAny(s, " \t\r\n") {
		return "contains white space"
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return "has an empty token"
		case t == ">" && i != len(tokens)-1:
			return "'>' may only be the last token"
		case t != ">" && t != "*" && strings.ContainsAny(t, "*>"):
			return "wildcards must be whole tokens"
		}
	}
	return ""
}

var kafkaTopicGlob = regexp.MustCompile(`^[a-zA-Z0-9._*?-]{1,249}$`)

// kafkaGlobError explains why s is not a topic glob, or returns "".
func kafkaGlobError(s string) string {
	if !kafkaTopicGlob.MatchString(s) {
		return "must be a topic name of letters, digits, '.', '_', '-' with '*' or '?' wildcards"
	}
	return ""
}
