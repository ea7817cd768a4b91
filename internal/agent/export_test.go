package agent

// ChatStates is how many chats the agent keeps scheduling state for.
func (a *Agent) ChatStates() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.state)
}
