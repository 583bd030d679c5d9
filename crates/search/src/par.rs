//! `par_map`: a map over a slice on all cores (scoped threads, one chunk each), in order.
//! The search lowers candidate states and computes their features this way, in the
//! session and in strategies alike.

/// `f` over `items` on all cores, results in the order of `items`. A chunk whose thread
/// panicked gives `fallback` for each of its items, so the result stays aligned.
pub fn par_map<T: Sync, U: Send + Clone>(
    items: &[T],
    fallback: U,
    f: impl Fn(&T) -> U + Sync,
) -> Vec<U> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|sc| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| sc.spawn(move || part.iter().map(f).collect::<Vec<U>>()))
            .collect();
        handles
            .into_iter()
            .zip(items.chunks(chunk))
            .flat_map(|(h, part)| {
                h.join()
                    .unwrap_or_else(|_| vec![fallback.clone(); part.len()])
            })
            .collect()
    })
}
