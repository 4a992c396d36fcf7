package prober

// Probing reports whether a probe of ns is running here, for the tests of package prober_test.
func (m *Manager) Probing(ns string) bool { return m.probing(ns) }
