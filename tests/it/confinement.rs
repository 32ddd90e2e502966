//! Paths that leave the project: a `--templates` folder cannot pull in a file from outside it,
//! neither through a symlink nor through `{% include %}`.

use crate::support::{envbuild, root, stderr_of, tempdir, write};

#[test]
fn templates_symlinks_and_includes_cannot_read_outside_files() {
    let tmp = tempdir();
    let secret = write(tmp.path(), "secret.txt", "SECRET-6f1d2c\n");
    let templates = tmp.path().join("templates");
    envbuild()
        .args(["templates", "dump"])
        .arg(&templates)
        .assert()
        .code(0);
    // A template that is a symlink to the outside file: not read (the embedded one is used).
    std::fs::remove_file(templates.join("pod.yaml.j2")).unwrap();
    std::os::unix::fs::symlink(&secret, templates.join("pod.yaml.j2")).unwrap();
    std::os::unix::fs::symlink(&secret, templates.join("evil.j2")).unwrap();
    let lock = root().join("specs/torch-gpu-env/envbuild.lock");
    let out = tmp.path().join("out");
    let render = |dockerfile_tail: &str| {
        let text = std::fs::read_to_string(root().join("templates/Dockerfile.j2")).unwrap();
        std::fs::write(
            templates.join("Dockerfile.j2"),
            format!("{text}{dockerfile_tail}\n"),
        )
        .unwrap();
        envbuild()
            .arg("render")
            .arg(&lock)
            .arg("--templates")
            .arg(&templates)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let leaked = |what: &str, output: &std::process::Output| {
        assert!(!stderr_of(output).contains("SECRET-6f1d2c"), "{what}");
        assert!(!String::from_utf8_lossy(&output.stdout).contains("SECRET-6f1d2c"));
        let mut dirs = vec![out.clone()];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    dirs.push(e.path());
                } else {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    assert!(!text.contains("SECRET-6f1d2c"), "{what}: {:?}", e.path());
                }
            }
        }
    };
    // Only the symlinked template: the render succeeds with the embedded pod.yaml.
    let ok = render("");
    assert_eq!(ok.status.code(), Some(0), "{}", stderr_of(&ok));
    leaked("symlinked template", &ok);
    // Includes of the symlink's name, of the absolute path and of a relative path out.
    let rel = format!("../{}", secret.file_name().unwrap().to_string_lossy());
    for include in ["evil.j2", secret.to_str().unwrap(), rel.as_str()] {
        let bad = render(&format!("{{% include \"{include}\" %}}"));
        assert_eq!(bad.status.code(), Some(1), "{include}: {}", stderr_of(&bad));
        assert!(
            stderr_of(&bad).contains("TEMPLATE_ERROR"),
            "{}",
            stderr_of(&bad)
        );
        leaked(include, &bad);
    }
}
