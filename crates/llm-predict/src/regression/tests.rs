use super::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// Learn `rounds` of essays (900 tokens) and sums (10 tokens), alternately.
fn taught(rounds: usize) -> LengthModel {
    let mut m = LengthModel::new();
    for i in 0..rounds {
        m.remember(&format!("write a long essay about topic {i}"), 900);
        m.remember(&format!("what is {i} plus {}", i + 1), 10);
    }
    m
}

#[test]
fn words_that_said_long_or_short_predict_it_for_unseen_prompts() {
    let m = taught(200);
    let long = m.lookup("write a long essay about the history of rome", None);
    let short = m.lookup("what is 7 plus 9", None);
    assert!(long.mean() > 300.0, "{:?}", long.atoms());
    assert!(short.mean() < 50.0, "{:?}", short.atoms());
    assert_eq!(m.learned(), 400);
}

#[test]
fn nothing_learned_is_the_prior_and_a_previous_answer_alone_is_all_there_is() {
    let m = LengthModel::new();
    assert_eq!(m.lookup("anything", None), prior());
    assert_eq!(m.lookup("anything", Some(77)).atoms(), &[(77.0, 1.0)]);
}

#[test]
fn a_previous_answer_joins_at_its_weight() {
    let m = taught(50);
    let d = m.lookup("tell me more", Some(4_000));
    let share: f64 = d
        .atoms()
        .iter()
        .filter(|a| a.0 == 4_000.0)
        .map(|a| a.1)
        .sum();
    let w = (PREVIOUS_ANSWER_WEIGHT * ATOMS as f64).round();
    assert!((share - w / (ATOMS as f64 + w)).abs() < 1e-9, "{share}");
}

#[test]
fn the_spread_is_as_wide_as_the_models_recent_errors() {
    let mut steady = LengthModel::new();
    let mut noisy = LengthModel::new();
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    for i in 0..2 * RESIDUALS {
        steady.remember(&format!("question {i}"), 100);
        noisy.remember(&format!("question {i}"), rng.random_range(10..1_000));
    }
    let width = |m: &LengthModel| {
        let d = m.lookup("question 5", None);
        d.max() / d.atoms()[0].0
    };
    assert!(width(&steady) < 1.2, "{}", width(&steady));
    assert!(width(&noisy) > 5.0, "{}", width(&noisy));
}

#[test]
fn features_are_unit_length_sorted_and_end_with_the_bias() {
    let x = features("The cat saw the cat");
    let (bias, words) = x.split_last().expect("the bias at least");
    assert_eq!(*bias, (DIM, 1.0));
    let norm: f32 = words.iter().map(|(_, v)| v * v).sum();
    assert!((norm - 1.0).abs() < 1e-5);
    assert!(words.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(x, features("the CAT saw the cat!"));
    assert_eq!(features(""), vec![(DIM, 1.0)]);
}

#[test]
fn it_predicts_and_learns_through_the_predictor_interface() {
    let mut m = LengthModel::new();
    let f = |text: &str| Features {
        embedding: Vec::new().into(),
        prompt: text.into(),
        previous_answer_tokens: None,
    };
    for _ in 0..100 {
        Predictor::learn(&mut m, f("summarize in one word"), 2);
    }
    assert!(m.predict(&f("summarize in one word")).mean() < 5.0);
}
