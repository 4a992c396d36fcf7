// Package clocktimer makes timers that fire at a point in time on an injected clock.
//
// A clock's timer is made for a duration, so a waiter for a deadline reads the clock, subtracts, and
// makes the timer: if the clock moves in between (a test stepping a fake clock, a process descheduled
// on a busy machine), the timer fires that much after the deadline, and with a fake clock it may
// never fire at all within a test. At makes the timer again when the clock moved while it was made.
package clocktimer
