package chat

// OnEvent adds f to what is called with every event of every chat, in the
// order they happen, on the goroutine that caused each: chat platform
// adapters learn this way of every message the assistant writes, whichever
// path wrote it (a run's send_msg_text, a command's answer, a prose
// reply). f must return at once and must not call the Service: queue the
// work and do it elsewhere. Hooks stay for the Service's life.
func (s *Service) OnEvent(f func(Event)) {
	s.hub.mu.Lock()
	s.hub.all = append(s.hub.all, f)
	s.hub.mu.Unlock()
}
