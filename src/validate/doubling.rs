//! Whether the ways a value may be checked against a schema multiply with each level of the
//! value. A `$ref` back to a schema a value is within makes a loop: the next level of the
//! value is checked against the schema again. When two different ways lead from one
//! subschema back to itself through the same steps into the value (two forms of a union,
//! each with `"left": {"$ref": "#/$defs/Expr"}`), each level of the value doubles the
//! checks, and a refused value twenty-five levels deep holds a core for minutes. This is an
//! automaton's exponential ambiguity (Weber and Seidl): subschemas are its states, a step
//! into the value its letter, and two ways are found by walking the automaton against
//! itself.

use super::applicators::{Step, applied};
use super::references::References;
use serde_json::Value;
use std::collections::HashMap;

/// The most subschemas one loop of references may hold for the walk of pairs: past it, a
/// schema is taken as doubling.
const MAX_LOOP: usize = 400;

/// The most pairs of steps the walk of pairs may take.
const MAX_PAIRS: usize = 4_000_000;

/// When some level of a value may be checked along two ways that both lead back to the
/// subschema they began from: the most ways one step into a value may multiply a way into
/// (at least 2). `None`: each level of a value is checked along a bounded number of ways.
pub(super) fn per_level<'a>(root: &'a Value, refs: &References<'a>) -> Option<u64> {
    let graph = Graph::of(root, refs);
    let (component, count) = components(&graph.all_edges());
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (node, &c) in component.iter().enumerate() {
        members[c].push(node);
    }
    let doubling = members
        .iter()
        .filter(|nodes| graph.loops(nodes, &component))
        .filter_map(|nodes| match nodes.len() > MAX_LOOP {
            true => Some(u64::MAX),
            false => Loop::of(&graph, nodes, &component).per_level(),
        });
    doubling.max()
}

/// How many levels deep a value is: the most steps from it to a part of it.
pub(super) fn depth(value: &Value) -> usize {
    let mut stack = vec![(value, 0)];
    let mut deepest = 0;
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(members) => stack.extend(members.values().map(|m| (m, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// A schema's subschemas and how each leads to the next: to the same value (a `$ref`, a
/// branch of a choice) or one step into it.
struct Graph<'a> {
    /// A step to the same value.
    same: Vec<Vec<usize>>,
    /// A step into the value.
    steps: Vec<Vec<(Step<'a>, usize)>>,
}

impl<'a> Graph<'a> {
    fn of(root: &'a Value, refs: &References<'a>) -> Self {
        let mut graph = Graph {
            same: Vec::new(),
            steps: Vec::new(),
        };
        let mut index: HashMap<*const Value, usize> = HashMap::new();
        let mut todo: Vec<&'a Value> = Vec::new();
        let mut node = |s: &'a Value, todo: &mut Vec<&'a Value>, g: &mut Graph<'a>| {
            *index.entry(s as *const Value).or_insert_with(|| {
                todo.push(s);
                g.same.push(Vec::new());
                g.steps.push(Vec::new());
                g.same.len() - 1
            })
        };
        node(root, &mut todo, &mut graph);
        let mut at = 0;
        while let Some(&s) = todo.get(at) {
            let Value::Object(members) = s else {
                at += 1;
                continue;
            };
            for target in refs.from(members) {
                let to = node(target, &mut todo, &mut graph);
                graph.same[at].push(to);
            }
            for (keyword, v) in members {
                for (step, child) in applied(keyword, v) {
                    let to = node(child, &mut todo, &mut graph);
                    match step {
                        // A name has no parts: no step leads on from it.
                        Some(Step::Name) => {}
                        Some(step) => graph.steps[at].push((step, to)),
                        None => graph.same[at].push(to),
                    }
                }
            }
            at += 1;
        }
        graph
    }

    fn all_edges(&self) -> Vec<Vec<usize>> {
        (0..self.same.len())
            .map(|n| {
                let steps = self.steps[n].iter().map(|&(_, to)| to);
                self.same[n].iter().copied().chain(steps).collect()
            })
            .collect()
    }

    /// Whether a component of subschemas leads round to itself through a step into the
    /// value (a loop of steps to the same value alone checks no deeper level).
    fn loops(&self, nodes: &[usize], component: &[usize]) -> bool {
        let c = component[nodes[0]];
        nodes
            .iter()
            .any(|&n| self.steps[n].iter().any(|&(_, to)| component[to] == c))
    }
}

/// One loop of references, its steps to the same value folded into the steps into it.
struct Loop<'a> {
    /// For each subschema of the loop (by its place in it), each step into the value that a
    /// check there may take.
    out: Vec<Vec<Out<'a>>>,
}

#[derive(Clone, Copy)]
struct Out<'a> {
    /// Where it is taken.
    from: usize,
    step: Step<'a>,
    /// Where it leads.
    to: usize,
    /// How many ways to the same value lead to where it is taken.
    ways: u64,
}

impl<'a> Loop<'a> {
    fn of(graph: &Graph<'a>, nodes: &[usize], component: &[usize]) -> Self {
        let c = component[nodes[0]];
        let place: HashMap<usize, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let within = |n: &usize| component[*n] == c;
        let reached = same_value_ways(graph, nodes, &place, &within);
        let out = reached
            .iter()
            .map(|ways| {
                let mut out = Vec::new();
                for (&from, &n) in ways {
                    for &(step, to) in graph.steps[nodes[from]].iter().filter(|(_, to)| within(to))
                    {
                        out.push(Out {
                            from,
                            step,
                            to: place[&to],
                            ways: n,
                        });
                    }
                }
                out
            })
            .collect();
        Loop { out }
    }

    /// The most ways one step from a place multiplies a way into, when the loop doubles.
    fn per_level(&self) -> Option<u64> {
        if !self.doubles() {
            return None;
        }
        let meeting = |out: &[Out<'_>], x: &Out<'_>| {
            (out.iter())
                .filter(|y| x.step.meets(y.step, x.from == y.from))
                .fold(0u64, |n, y| n.saturating_add(y.ways))
        };
        let most = self
            .out
            .iter()
            .flat_map(|out| out.iter().map(|x| meeting(out, x)));
        Some(most.max().unwrap_or(0).max(2))
    }

    /// Walks the loop against itself: a pair of places two ways may be at after the same
    /// steps. Two ways from one place back to it are found when a pair of one place leads
    /// round to a pair of two, or takes two different steps and comes back.
    fn doubles(&self) -> bool {
        let n = self.out.len();
        let pair = |i: usize, j: usize| i * n + j;
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n * n];
        let mut parted: Vec<(usize, usize)> = Vec::new();
        let mut taken = 0usize;
        for i in 0..n {
            for j in 0..n {
                for (a, x) in self.out[i].iter().enumerate() {
                    for (b, y) in self.out[j].iter().enumerate() {
                        taken += 1;
                        if taken > MAX_PAIRS {
                            return true;
                        }
                        let same = i == j && x.from == y.from;
                        if !x.step.meets(y.step, same) {
                            continue;
                        }
                        edges[pair(i, j)].push(pair(x.to, y.to));
                        if i == j && x.to == y.to && (a != b || x.ways > 1) {
                            parted.push((pair(i, i), pair(x.to, x.to)));
                        }
                    }
                }
            }
        }
        let (component, count) = components(&edges);
        let mut one = vec![false; count];
        let mut two = vec![false; count];
        for i in 0..n {
            for j in 0..n {
                let c = component[pair(i, j)];
                if i == j { one[c] = true } else { two[c] = true }
            }
        }
        (0..count).any(|c| one[c] && two[c])
            || parted.iter().any(|&(a, b)| component[a] == component[b])
    }
}

/// For each place of the loop, the places a check there reaches on the same value, each with
/// how many ways lead there. A step back to a place the walk is at already is left out: it
/// checks nothing new.
fn same_value_ways(
    graph: &Graph<'_>,
    nodes: &[usize],
    place: &HashMap<usize, usize>,
    within: &dyn Fn(&usize) -> bool,
) -> Vec<HashMap<usize, u64>> {
    let next = without_loops(graph, nodes, place, within);
    let mut ways: Vec<Option<HashMap<usize, u64>>> = vec![None; next.len()];
    for start in 0..next.len() {
        let mut stack = vec![start];
        while let Some(&at) = stack.last() {
            if ways[at].is_some() {
                stack.pop();
                continue;
            }
            let pending: Vec<usize> = next[at]
                .iter()
                .copied()
                .filter(|&t| ways[t].is_none())
                .collect();
            if !pending.is_empty() {
                stack.extend(pending);
                continue;
            }
            let mut mine = HashMap::from([(at, 1u64)]);
            for &t in &next[at] {
                for (&p, &w) in ways[t].as_ref().into_iter().flatten() {
                    let e = mine.entry(p).or_insert(0);
                    *e = e.saturating_add(w);
                }
            }
            ways[at] = Some(mine);
            stack.pop();
        }
    }
    ways.into_iter().map(Option::unwrap_or_default).collect()
}

/// The loop's steps to the same value, each place's by its place in the loop, with those
/// that lead back to a place being walked cut (once, walking them in order): what is left
/// has no loop, so each place's ways are summed from those of the places it leads to.
fn without_loops(
    graph: &Graph<'_>,
    nodes: &[usize],
    place: &HashMap<usize, usize>,
    within: &dyn Fn(&usize) -> bool,
) -> Vec<Vec<usize>> {
    let n = nodes.len();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut state = vec![0u8; n];
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some(&mut (at, ref mut k)) = stack.last_mut() {
            let targets = &graph.same[nodes[at]];
            match targets.get(*k) {
                Some(to) => {
                    *k += 1;
                    if !within(to) {
                        continue;
                    }
                    let to = place[to];
                    match state[to] {
                        0 => {
                            next[at].push(to);
                            state[to] = 1;
                            stack.push((to, 0));
                        }
                        2 => next[at].push(to),
                        _ => {}
                    }
                }
                None => {
                    state[at] = 2;
                    stack.pop();
                }
            }
        }
    }
    next
}

/// The strongly connected components of a graph (Tarjan's, without recursion): each node's
/// component, and how many there are.
fn components(edges: &[Vec<usize>]) -> (Vec<usize>, usize) {
    const NONE: usize = usize::MAX;
    let n = edges.len();
    let (mut index, mut low) = (vec![NONE; n], vec![0; n]);
    let mut on = vec![false; n];
    let mut component = vec![NONE; n];
    let (mut stack, mut work) = (Vec::new(), Vec::new());
    let (mut next, mut count) = (0, 0);
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        work.push((root, 0usize));
        while let Some(&(v, i)) = work.last() {
            if i == 0 && index[v] == NONE {
                (index[v], low[v]) = (next, next);
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = edges[v].get(i) {
                work.last_mut().expect("a node is being walked").1 += 1;
                if index[w] == NONE {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    component[w] = count;
                    if w == v {
                        break;
                    }
                }
                count += 1;
            }
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
        }
    }
    (component, count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn per_level_of(root: &Value) -> Option<u64> {
        per_level(root, &References::of(root))
    }

    /// A union of forms as Pydantic writes it: each form's members of the union's type hold
    /// the union again, with the forms referred to by name.
    fn union(forms: &[(&str, &[&str])]) -> Value {
        let mut defs = serde_json::Map::new();
        let choice: Vec<Value> = forms
            .iter()
            .map(|(name, _)| json!({"$ref": format!("#/$defs/{name}")}))
            .collect();
        for (name, members) in forms {
            let mut properties = serde_json::Map::new();
            properties.insert("kind".into(), json!({"const": name}));
            for m in *members {
                properties.insert((*m).into(), json!({"oneOf": choice}));
            }
            defs.insert(
                (*name).into(),
                json!({"type": "object", "properties": properties}),
            );
        }
        json!({"$defs": defs, "properties": {"expr": {"oneOf": choice}}})
    }

    #[test]
    fn two_forms_holding_the_union_in_one_member_double() {
        let expr = union(&[
            ("num", &[]),
            ("add", &["left", "right"]),
            ("mul", &["left", "right"]),
        ]);
        assert_eq!(per_level_of(&expr), Some(2));
        let filter = union(&[("eq", &[]), ("and", &["all"]), ("or", &["all"])]);
        assert_eq!(per_level_of(&filter), Some(2));
        // Each form's own member: one way per level.
        let distinct = union(&[
            ("num", &[]),
            ("add", &["left", "right"]),
            ("neg", &["operand"]),
        ]);
        assert_eq!(per_level_of(&distinct), None);
        let two = (0..2)
            .map(|i| json!({"properties": {"x": {"$ref": "#"}}, "required": [format!("k{i}")]}))
            .collect::<Vec<_>>();
        assert_eq!(per_level_of(&json!({"anyOf": two})), Some(2));
        let twice = json!({"properties": {"x": {"allOf": [{"$ref": "#"}, {"$ref": "#"}]}}});
        assert_eq!(per_level_of(&twice), Some(2), "two ways to the same value");
        let three = union(&[("a", &["x"]), ("b", &["x"]), ("c", &["x", "y"])]);
        assert_eq!(per_level_of(&three), Some(3));
    }

    #[test]
    fn every_kind_of_reference_is_followed() {
        let branches = |to: Value| -> Vec<Value> {
            (0..4)
                .map(|i| json!({"properties": {"x": to}, "required": [format!("k{i}")]}))
                .collect()
        };
        let schemas = [
            json!({"$anchor": "n", "anyOf": branches(json!({"$ref": "#n"}))}),
            json!({"$recursiveAnchor": true, "anyOf": branches(json!({"$recursiveRef": "#"}))}),
            json!({"$dynamicAnchor": "n", "anyOf": branches(json!({"$dynamicRef": "#n"}))}),
            json!({"$ref": "urn:n", "$defs": {"n": {"$id": "urn:n",
                "anyOf": branches(json!({"$ref": "urn:n"}))}}}),
        ];
        for s in schemas {
            assert_eq!(per_level_of(&s), Some(4), "{s}");
        }
        // Through draft 7's `dependencies`, whose schemas apply to the value itself.
        let deps = json!({"dependencies": {"a": {"anyOf": branches(json!({"$ref": "#"}))},
            "b": ["a"]}});
        assert_eq!(per_level_of(&deps), Some(4));
    }

    #[test]
    fn trees_lists_and_any_json_do_not_double() {
        let tree = json!({"$defs": {"n": {"type": "object", "properties": {
            "left": {"$ref": "#/$defs/n"}, "right": {"$ref": "#/$defs/n"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
            "properties": {"root": {"$ref": "#/$defs/n"}}});
        assert_eq!(per_level_of(&tree), None);
        let any = json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}},
            {"type": "object", "additionalProperties": {"$ref": "#"},
                "patternProperties": {"^x": {"$ref": "#"}}}]});
        assert_eq!(per_level_of(&any), None);
        let pair = json!({"type": "array", "prefixItems": [{"$ref": "#"}, {"$ref": "#"}]});
        assert_eq!(per_level_of(&pair), None);
        let plain = json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}});
        assert_eq!(per_level_of(&plain), None);
        // A loop of references to the same value alone reaches no deeper level.
        assert_eq!(per_level_of(&json!({"allOf": [{"$ref": "#"}]})), None);
    }

    #[test]
    fn parts_two_keywords_share_double_where_they_may_meet() {
        // A pattern and a named member may both hold a member; the members no other keyword
        // names are not those of the same schema, but may be those of another.
        let both =
            json!({"properties": {"x": {"$ref": "#"}}, "patternProperties": {"^x": {"$ref": "#"}}});
        assert_eq!(per_level_of(&both), Some(2));
        let across = json!({"anyOf": [{"properties": {"x": {"$ref": "#"}}},
            {"additionalProperties": {"$ref": "#"}}]});
        assert_eq!(per_level_of(&across), Some(2));
        let items = json!({"anyOf": [{"items": {"$ref": "#"}}, {"contains": {"$ref": "#"}}]});
        assert_eq!(per_level_of(&items), Some(2));
    }

    #[test]
    fn components_are_found_without_recursion() {
        let n = 100_000;
        let chain: Vec<Vec<usize>> = (0..n).map(|i| vec![(i + 1) % n]).collect();
        let (component, count) = components(&chain);
        assert_eq!(count, 1);
        assert!(component.iter().all(|&c| c == 0));
        let line: Vec<Vec<usize>> = (0..n)
            .map(|i| if i + 1 < n { vec![i + 1] } else { vec![] })
            .collect();
        assert_eq!(components(&line).1, n);
    }
}
