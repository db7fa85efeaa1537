//! The tool each task runs. A task-augmented `tools/call` (SEP-1686, 2025-11-25) is answered
//! with the task it started, and the tool's result comes later, as the answer to
//! `tasks/result`, which names only the task. To hold that result to the rules of its call's
//! answer (output validation, error rewriting), the tool is remembered here when the task
//! starts.
//!
//! Only tasks whose output is checked are kept (a tool with an `outputSchema`, under
//! `validation.output`). Servers name their tasks and clients start them, so what is kept is
//! bounded: at most [`MAX_TASKS`], the oldest forgotten first, and a task id or tool name
//! past [`MAX_NAME`] bytes is not kept at all (docs/security.md has what that costs). A
//! forgotten task's result passes as it comes, as any answer toolgate has no rule for.

use crate::catalog::ScopeKey;
use crate::locks::MutexExt;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Tasks kept at once, across every scope.
pub(crate) const MAX_TASKS: usize = 4096;

/// The longest task id or tool name kept (servers write task ids of 32 to 36 characters).
pub(crate) const MAX_NAME: usize = 256;

/// A task as a scope's client names it: its scope (a session, or a credential) and its id.
type Named = (ScopeKey, Box<str>);

#[derive(Default)]
pub struct Tasks(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    tools: HashMap<Named, Box<str>>,
    /// The order they started in, to forget the oldest.
    order: VecDeque<Named>,
}

impl Tasks {
    /// A call to `tool` in scope `key` started task `id`.
    pub(crate) fn started(&self, key: ScopeKey, id: &str, tool: &str) {
        if id.len() > MAX_NAME || tool.len() > MAX_NAME {
            return;
        }
        let named: Named = (key, id.into());
        let mut kept = self.0.locked();
        if kept.tools.insert(named.clone(), tool.into()).is_some() {
            return;
        }
        kept.order.push_back(named);
        if kept.order.len() > MAX_TASKS
            && let Some(oldest) = kept.order.pop_front()
        {
            kept.tools.remove(&oldest);
        }
    }

    /// The tool task `id` of scope `key` runs, if it is kept.
    pub(crate) fn tool(&self, key: ScopeKey, id: &str) -> Option<Box<str>> {
        let kept = self.0.locked();
        kept.tools.get(&(key, id.into())).cloned()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.locked().tools.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(context: u64) -> ScopeKey {
        ScopeKey {
            upstream: 0,
            context,
        }
    }

    #[test]
    fn a_task_is_known_in_its_own_scope_only() {
        let tasks = Tasks::default();
        tasks.started(scope(1), "t-1", "research");
        assert_eq!(tasks.tool(scope(1), "t-1").as_deref(), Some("research"));
        assert_eq!(tasks.tool(scope(2), "t-1"), None);
        assert_eq!(tasks.tool(scope(1), "t-2"), None);
    }

    #[test]
    fn the_oldest_are_forgotten_past_the_bound() {
        let tasks = Tasks::default();
        for i in 0..MAX_TASKS + 5 {
            tasks.started(scope(1), &format!("t-{i}"), "research");
        }
        assert_eq!(tasks.len(), MAX_TASKS);
        assert_eq!(tasks.tool(scope(1), "t-4"), None);
        assert!(tasks.tool(scope(1), "t-5").is_some());
        // Started again, a task is not kept twice.
        tasks.started(scope(1), "t-5", "research");
        assert_eq!(tasks.len(), MAX_TASKS);
        tasks.started(scope(2), &"x".repeat(MAX_NAME + 1), "research");
        tasks.started(scope(2), "t-1", &"x".repeat(MAX_NAME + 1));
        assert_eq!(tasks.len(), MAX_TASKS);
    }
}
