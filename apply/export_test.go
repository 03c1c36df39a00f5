package apply

// SetIntentWriteHook sets a function the journal calls before each
// inventory write of recordIntent, with the number of packages waiting in
// the next batch; nil removes it. Tests only.
func SetIntentWriteHook(f func(queued func() int)) { intentWriteHook = f }
