//! A label selector as `kubectl -l` writes it (`k8s.io/apimachinery/pkg/labels.Parse`):
//! `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`, joined
//! by commas. A live answer leaves `-l` to the API server; a snapshot has none. Pure.

use crate::model::interner::Interner;
use crate::model::{LabelSet, Requirement, SelectorOperator, Str};
use crate::rules::eligibility::{label_requirement_is_valid, label_requirement_matches};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {problem}")]
pub struct SelectorError {
    pub selector: String,
    pub problem: String,
}

/// Every requirement must hold; the empty selector selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSelector(Vec<Requirement>);

impl NodeSelector {
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let error = |problem: String| SelectorError { selector: selector.to_owned(), problem };
        let mut requirements = Vec::new();
        for part in split_top_level(selector).map_err(error)? {
            let part = part.trim();
            if part.is_empty() {
                if selector.trim().is_empty() {
                    continue;
                }
                return Err(error("an empty requirement".into()));
            }
            let requirement = requirement(part).map_err(error)?;
            if !label_requirement_is_valid(&requirement) {
                return Err(error(format!("{part:?} is not a valid requirement (key, values or operator)")));
            }
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    pub fn matches(&self, labels: &LabelSet) -> bool {
        self.0.iter().all(|r| label_requirement_matches(r, labels))
    }

    /// [`Self::matches`] on an object's labels, given as (key, value) pairs.
    pub fn matches_pairs<'a, I>(&self, labels: I) -> bool
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
        I::IntoIter: Clone,
    {
        self.matches(&Interner::default().labels(labels))
    }
}

/// Commas outside parentheses separate requirements.
fn split_top_level(selector: &str) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (at, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("a ')' without its '('")?,
            ',' if depth == 0 => {
                parts.push(&selector[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a '(' without its ')'".into());
    }
    parts.push(&selector[start..]);
    Ok(parts)
}

fn requirement(part: &str) -> Result<Requirement, String> {
    let make = |key: &str, operator, values: Vec<&str>| Requirement {
        key: Str::from(key.trim()),
        operator,
        values: values.into_iter().map(|v| Str::from(v.trim())).collect(),
    };
    if let Some(key) = part.strip_prefix('!') {
        return Ok(make(key, SelectorOperator::DoesNotExist, vec![]));
    }
    // `key in (a,b)` and `key notin (a,b)`: a set, after whitespace.
    if let Some((key, rest)) = part.split_once(char::is_whitespace) {
        let rest = rest.trim_start();
        for (word, operator) in [("notin", SelectorOperator::NotIn), ("in", SelectorOperator::In)] {
            if let Some(set) = rest.strip_prefix(word).map(str::trim_start) {
                let Some(values) = set.strip_prefix('(').and_then(|s| s.strip_suffix(')')) else {
                    return Err(format!("{part:?}: expected ({word} VALUE,...)"));
                };
                return Ok(make(key, operator, values.split(',').collect()));
            }
        }
    }
    for (symbol, operator) in [
        ("!=", SelectorOperator::NotIn),
        ("==", SelectorOperator::In),
        ("=", SelectorOperator::In),
        (">", SelectorOperator::Gt),
        ("<", SelectorOperator::Lt),
    ] {
        if let Some((key, value)) = part.split_once(symbol) {
            return Ok(make(key, operator, vec![value]));
        }
    }
    Ok(make(part, SelectorOperator::Exists, vec![]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> crate::model::Labels {
        let owned: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Interner::default().labels(owned.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    #[test]
    fn kubectl_selectors_select_as_the_api_server_does() {
        let node = labels(&[("pool", "gpu"), ("zone", "a"), ("cores", "64")]);
        let cases = [
            ("", true),
            ("pool=gpu", true),
            ("pool==gpu", true),
            ("pool!=gpu", false),
            ("pool", true),
            ("!pool", false),
            ("!absent", true),
            ("pool in (cpu, gpu)", true),
            ("pool notin (cpu,gpu)", false),
            ("absent notin (x)", true),
            ("pool=gpu,zone=b", false),
            ("pool=gpu, zone in (a,b)", true),
            ("cores>32", true),
            ("cores<32", false),
        ];
        for (selector, selected) in cases {
            let parsed = NodeSelector::parse(selector).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(parsed.matches(&node), selected, "{selector}");
        }
    }

    #[test]
    fn a_bad_selector_is_refused_with_what_is_wrong() {
        for selector in ["pool in (a", "pool)", "bad key=x", "pool=a,,zone=b", "cores>x", "pool in a,b", "-x=1"] {
            let error = NodeSelector::parse(selector).expect_err(selector);
            assert!(error.to_string().starts_with(&format!("invalid label selector {selector:?}")), "{error}");
        }
    }
}
