// Package charttest tests the Helm chart in ../weighstation: see README.md beside this file.
package charttest
