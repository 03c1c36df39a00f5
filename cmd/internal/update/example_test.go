package update_test

import (
	"fmt"
	"time"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
)

// The --update-schedule values the agent takes: a descriptor, or a cron
// expression in a named time zone. Next is when the poll after t runs.
func ExampleParseSchedule() {
	t := time.Date(2026, time.November, 27, 16, 20, 0, 0, time.UTC) // a Friday
	for _, spec := range []string{"@every 15m", "CRON_TZ=UTC 0 3 * * 1-5", "every five minutes"} {
		s, err := update.ParseSchedule(spec)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: next %s\n", s, s.Next(t).UTC().Format(time.RFC3339))
	}
	// Output:
	// @every 15m: next 2026-11-27T16:35:00Z
	// CRON_TZ=UTC 0 3 * * 1-5: next 2026-11-30T03:00:00Z
	// update schedule "every five minutes": expected exactly 5 fields, found 3: [every five minutes] (want a cron expression such as "*/10 * * * *" or "@every 5m")
}
