package events

// PerTeam is the bound of one team's attempts at once, for the tests.
const PerTeam = perTeam
