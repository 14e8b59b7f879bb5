package nodeagent

// TEMPORARY (branch state): a stand-in for the engine's Drain, which helper engine adds on
// its branch; the integrator deletes this file when that lands. It only lets the agent's
// drain wiring compile and run: an empty desire and one full pass undo the ledger's
// entries, but it does not stop later SetDesired calls or fork events from placing again.
func (e *Engine) Drain() int {
	e.SetDesired(nil)
	e.Pass()
	e.passMu.Lock()
	defer e.passMu.Unlock()
	return len(e.ledger)
}
