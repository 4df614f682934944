//! Who may do what, resolved: the `[authority]` rules of the configuration file with every user
//! and `@group` turned into ids, and the questions the daemon asks of them for every request
//! that needs authority (may this peer switch the policy, see or hint another's queues, use this
//! priority). Kept apart from the file's shape and checks (`config.rs`) because it asks the
//! machine (its users and groups) and answers at run time.

use crate::config::{DaemonConfig, PriorityRange};
use crate::error::DaemonError;
use crate::peer::Peer;

impl DaemonConfig {
    /// The authority rules with every name resolved to an id.
    pub fn authority(&self) -> Result<Authority, DaemonError> {
        let a = &self.authority;
        Ok(Authority {
            daemon_uid: nix::unistd::getuid().as_raw(),
            set_policy: Who::resolve("authority.set_policy", &a.set_policy)?,
            hint_others: Who::resolve("authority.hint_others", &a.hint_others)?,
            see_all: Who::resolve("authority.see_all", &a.see_all)?,
            priority: a.priority,
            priorities: a
                .priorities
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    Ok((
                        Who::resolve(&format!("authority.priorities[{i}].who"), &r.who)?,
                        PriorityRange {
                            min: r.min,
                            max: r.max,
                        },
                    ))
                })
                .collect::<Result<_, DaemonError>>()?,
        })
    }

    /// The gid of `socket.group`, if one is set.
    pub fn socket_gid(&self) -> Result<Option<u32>, DaemonError> {
        self.socket
            .group
            .as_deref()
            .map(|g| group_id("socket.group", g))
            .transpose()
    }
}

fn group_id(field: &str, name: &str) -> Result<u32, DaemonError> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => numeric(name).ok_or_else(|| DaemonError::UnknownName {
            field: field.into(),
            kind: "group",
            name: name.into(),
        }),
    }
}

/// A user or group given by its number, as `chown` takes it when no such name exists. A
/// container's tenants usually have no names in the daemon's image (a pod's `runAsUser` is a
/// number), so rules must be able to name them by id.
fn numeric(name: &str) -> Option<u32> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

/// A set of users and groups, by id.
#[derive(Clone, Debug, Default)]
struct Who {
    uids: Vec<u32>,
    gids: Vec<u32>,
}

impl Who {
    fn resolve(field: &str, names: &[String]) -> Result<Who, DaemonError> {
        let mut who = Who::default();
        for name in names {
            if let Some(group) = name.strip_prefix('@') {
                who.gids.push(group_id(field, group)?);
            } else {
                let uid = match nix::unistd::User::from_name(name) {
                    Ok(Some(u)) => Some(u.uid.as_raw()),
                    _ => numeric(name),
                };
                who.uids.push(uid.ok_or_else(|| DaemonError::UnknownName {
                    field: field.into(),
                    kind: "user",
                    name: name.clone(),
                })?);
            }
        }
        Ok(who)
    }

    fn contains(&self, peer: &Peer) -> bool {
        self.uids.contains(&peer.uid) || peer.gids.iter().any(|g| self.gids.contains(g))
    }
}

/// Who may do what, resolved: what the daemon consults for every request that needs authority.
#[derive(Clone, Debug)]
pub struct Authority {
    daemon_uid: u32,
    set_policy: Who,
    hint_others: Who,
    see_all: Who,
    priority: PriorityRange,
    priorities: Vec<(Who, PriorityRange)>,
}

/// What the default configuration resolves to: nobody named, the default priority range.
impl Default for Authority {
    fn default() -> Self {
        Authority {
            daemon_uid: nix::unistd::getuid().as_raw(),
            set_policy: Who::default(),
            hint_others: Who::default(),
            see_all: Who::default(),
            priority: PriorityRange::default(),
            priorities: Vec::new(),
        }
    }
}

impl Authority {
    /// Root or the daemon's own user: every authority, any priority.
    pub fn is_admin(&self, peer: &Peer) -> bool {
        peer.uid == 0 || peer.uid == self.daemon_uid
    }

    /// May `peer` switch the policy?
    pub fn may_set_policy(&self, peer: &Peer) -> bool {
        self.is_admin(peer) || self.set_policy.contains(peer)
    }

    /// May `peer` see `other`'s queues in `top` (and in the metrics)?
    pub fn may_see(&self, peer: &Peer, other: &Peer) -> bool {
        peer.uid == other.uid || self.is_admin(peer) || self.see_all.contains(peer)
    }

    /// May `peer` hint the queues of `other`?
    pub fn may_hint(&self, peer: &Peer, other: &Peer) -> bool {
        peer.uid == other.uid || self.is_admin(peer) || self.hint_others.contains(peer)
    }

    /// The priorities `peer` may use (`None`: any).
    pub fn priority_range(&self, peer: &Peer) -> Option<PriorityRange> {
        if self.is_admin(peer) {
            return None;
        }
        Some(
            self.priorities
                .iter()
                .find(|(who, _)| who.contains(peer))
                .map_or(self.priority, |(_, r)| *r),
        )
    }

    /// Refuse `priority` if it is outside `peer`'s range: the refusal says the range.
    pub fn check_priority(&self, peer: &Peer, priority: i32) -> Result<(), DaemonError> {
        match self.priority_range(peer) {
            Some(r) if priority < r.min || priority > r.max => Err(DaemonError::PriorityRefused {
                priority,
                uid: peer.uid,
                min: r.min,
                max: r.max,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gids: &[u32]) -> Peer {
        Peer {
            pid: 1,
            uid,
            gids: gids.to_vec(),
            name: "p".into(),
        }
    }

    #[test]
    fn defaults_are_safe_for_a_shared_machine() {
        let a = Authority::default();
        let me = nix::unistd::getuid().as_raw();
        let stranger = peer(me.wrapping_add(4242), &[]);
        let root = peer(0, &[]);
        assert!(!a.may_set_policy(&stranger));
        assert!(a.may_set_policy(&root) && a.may_set_policy(&peer(me, &[])));
        assert!(!a.may_see(&stranger, &root) && a.may_see(&stranger, &stranger));
        assert!(!a.may_hint(&stranger, &root) && a.may_hint(&root, &stranger));
        assert_eq!(
            a.priority_range(&stranger),
            Some(PriorityRange {
                min: -100,
                max: 100
            })
        );
        assert!(a.check_priority(&stranger, 100).is_ok());
        let refused = a
            .check_priority(&stranger, 101)
            .expect_err("outside")
            .to_string();
        assert!(refused.contains("-100..=100"), "{refused}");
        assert!(a.check_priority(&root, i32::MAX).is_ok());
    }

    #[test]
    fn rules_name_users_and_groups() {
        let config = DaemonConfig::parse(
            r#"
            [authority]
            set_policy = ["root", "@root"]
            priority = { min = 0, max = 5 }
            [[authority.priorities]]
            who = ["@root"]
            min = -1
            max = 1000
            "#,
        )
        .expect("valid");
        let a = config.authority().expect("root and its group exist");
        let member = peer(4242, &[0]);
        assert!(a.may_set_policy(&member));
        assert!(!a.may_set_policy(&peer(4242, &[7])));
        assert_eq!(
            a.priority_range(&member),
            Some(PriorityRange { min: -1, max: 1000 })
        );
        assert_eq!(
            a.priority_range(&peer(4242, &[])),
            Some(PriorityRange { min: 0, max: 5 })
        );
    }

    #[test]
    fn rules_name_users_and_groups_without_names_by_number() {
        let config = DaemonConfig::parse(
            r#"
            [[authority.priorities]]
            who = ["4243"]
            min = 0
            max = 100
            [[authority.priorities]]
            who = ["@4244"]
            min = -100
            max = 0
            "#,
        )
        .expect("valid");
        let a = config.authority().expect("numbers need no names");
        let range = |p: &Peer| a.priority_range(p).expect("not root");
        assert_eq!(range(&peer(4243, &[])), PriorityRange { min: 0, max: 100 });
        assert_eq!(
            range(&peer(7, &[4244])),
            PriorityRange { min: -100, max: 0 }
        );
        let refused = a
            .check_priority(&peer(7, &[4244]), 10)
            .expect_err("not its range")
            .to_string();
        assert!(refused.contains("-100..=0"), "{refused}");
        for bad in ["-1", "12a", "+5", ""] {
            assert!(numeric(bad).is_none(), "{bad:?}");
        }
    }
}
