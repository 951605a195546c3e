//! Parser and evaluator tests.
