//! The crate's layout rules (`testkit::layout_tests`): no function outside tests runs past
//! 150 lines, and no modules import each other in a circle.

testkit::layout_tests!();
