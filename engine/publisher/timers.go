package publisher

import "time"

// timerLoop resends what timed out and what waits for its retry, until Close. It looks every
// AckTimeout/4, and every RetryDelay/4 while a refused message waits for its retry (a scan of
// the window under the lock: not more often than needed).
func (p *Publisher) timerLoop() {
	defer close(p.loopDone)
	slow := max(p.opts.AckTimeout/4, time.Millisecond)
	fast := max(min(p.opts.AckTimeout, p.opts.RetryDelay)/4, time.Millisecond)
	timer := time.NewTimer(slow)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			if p.checkTimers(p.now()) {
				timer.Reset(fast)
			} else {
				timer.Reset(slow)
			}
		case <-p.retry:
			if !timer.Stop() {
				select { // drained in case it fired meanwhile
				case <-timer.C:
				default:
				}
			}
			timer.Reset(fast)
		case <-p.stop:
			return
		}
	}
}

// checkTimers resends what is due, and says whether a retry is still waiting.
func (p *Publisher) checkTimers(now instant) (retrying bool) {
	p.mu.Lock()
	for seq := p.floor + 1; seq < p.next; seq++ {
		f := p.pendingLocked(seq)
		switch {
		case f == nil:
		case f.sends == 0: // in the pack being filled: its linger sends it
		case f.retryAt != 0:
			if now < f.retryAt {
				retrying = true
			} else {
				p.resendLocked(f, &p.stats.ResentRefused, now)
			}
		case f.sentAt.since(now) >= p.opts.AckTimeout:
			p.resendLocked(f, &p.stats.ResentTimeout, now)
		}
	}
	p.advanceLocked()
	answered := p.takeAnswered()
	p.mu.Unlock()
	p.callbacks(answered)
	return retrying
}
