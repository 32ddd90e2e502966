//! In-process timing of the render pipeline's steps (run by `bench/render.sh`): what `envbuild
//! render` costs without process start-up and file writes. Reads the example locks in `specs/`.

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const N: u32 = 200;
    let table = Instant::now();
    for _ in 0..N {
        envbuild::core::compat::Table::embedded()?;
    }
    println!("{:45} {:?}", "embedded table parse", table.elapsed() / N);
    let mut dirs: Vec<_> = std::fs::read_dir("specs")?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let text = std::fs::read_to_string(dir.join("envbuild.lock"))?;
        let lock = envbuild::core::lock::Lock::from_toml(&text)?;
        let t = Instant::now();
        for _ in 0..N {
            let lock = envbuild::core::lock::Lock::from_toml(&text)?;
            envbuild::core::render::render(&lock, &Default::default())
                .map_err(|f| f.to_string())?;
        }
        let label = format!("{}: parse lock + render", dir.display());
        println!("{label:45} {:?}", t.elapsed() / N);
        drop(lock);
    }
    Ok(())
}
