// A must-fail fixture of tools/check_standalone.cmake. docs/planted.md is cited as §n: the bare sections below are
// that page's. One it has, §1, is not reported; one it lacks is: §4.2.
