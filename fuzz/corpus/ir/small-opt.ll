; ModuleID = 'small.c'
source_filename = "small.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@.str = private unnamed_addr constant [4 x i8] c"%d\0A\00", align 1

; Function Attrs: nofree nosync nounwind readonly uwtable
define dso_local i32 @transform(i32* nocapture noundef readonly %0, i32 noundef %1) local_unnamed_addr #0 !dbg !9 {
  %3 = icmp sgt i32 %1, 0, !dbg !12
  br i1 %3, label %4, label %12, !dbg !13

4:                                                ; preds = %2
  %5 = zext i32 %1 to i64, !dbg !12
  br label %6, !dbg !13

6:                                                ; preds = %4, %14
  %7 = phi i64 [ 0, %4 ], [ %16, %14 ]
  %8 = phi i32 [ 0, %4 ], [ %15, %14 ]
  %9 = icmp eq i64 %7, 0, !dbg !14
  br i1 %9, label %14, label %10, !dbg !15

10:                                               ; preds = %6
  %11 = getelementptr inbounds i32, i32* %0, i64 %7
  br label %18, !dbg !15

12:                                               ; preds = %14, %2
  %13 = phi i32 [ 0, %2 ], [ %15, %14 ], !dbg !16
  ret i32 %13, !dbg !17

14:                                               ; preds = %43, %6
  %15 = phi i32 [ %8, %6 ], [ %44, %43 ], !dbg !18
  %16 = add nuw nsw i64 %7, 1, !dbg !19
  %17 = icmp eq i64 %16, %5, !dbg !12
  br i1 %17, label %12, label %6, !dbg !13, !llvm.loop !20

18:                                               ; preds = %10, %43
  %19 = phi i64 [ 0, %10 ], [ %45, %43 ]
  %20 = phi i32 [ %8, %10 ], [ %44, %43 ]
  %21 = getelementptr inbounds i32, i32* %0, i64 %19, !dbg !23
  %22 = load i32, i32* %21, align 4, !dbg !23, !tbaa !24
  %23 = and i32 %22, 3, !dbg !28
  switch i32 %23, label %39 [
    i32 0, label %24
    i32 1, label %33
  ], !dbg !29

24:                                               ; preds = %18
  %25 = load i32, i32* %11, align 4, !dbg !30, !tbaa !24
  %26 = add nsw i32 %25, %22, !dbg !31
  %27 = sdiv i32 %26, 2, !dbg !34
  %28 = icmp slt i32 %27, 255, !dbg !35
  %29 = select i1 %28, i32 %27, i32 255, !dbg !35
  %30 = icmp sgt i32 %29, 0, !dbg !35
  %31 = select i1 %30, i32 %29, i32 0, !dbg !35
  %32 = add nsw i32 %31, %20, !dbg !38
  br label %43, !dbg !39

33:                                               ; preds = %18
  %34 = icmp slt i32 %22, 7, !dbg !40
  %35 = select i1 %34, i32 %22, i32 7, !dbg !40
  %36 = icmp sgt i32 %35, 1, !dbg !40
  %37 = select i1 %36, i32 %35, i32 1, !dbg !40
  %38 = sub nsw i32 %20, %37, !dbg !42
  br label %43, !dbg !43

39:                                               ; preds = %18
  %40 = and i32 %22, 7, !dbg !44
  %41 = tail call fastcc i32 @fib(i32 noundef %40), !dbg !45
  %42 = xor i32 %41, %20, !dbg !46
  br label %43, !dbg !21

43:                                               ; preds = %24, %33, %39
  %44 = phi i32 [ %42, %39 ], [ %38, %33 ], [ %32, %24 ], !dbg !18
  %45 = add nuw nsw i64 %19, 1, !dbg !47
  %46 = icmp eq i64 %45, %7, !dbg !14
  br i1 %46, label %14, label %18, !dbg !15, !llvm.loop !48
}

; Function Attrs: argmemonly mustprogress nofree nosync nounwind willreturn
declare void @llvm.lifetime.start.p0i8(i64 immarg, i8* nocapture) #1

; Function Attrs: nofree nosync nounwind readnone uwtable
define internal fastcc i32 @fib(i32 noundef %0) unnamed_addr #2 !dbg !49 {
  %2 = icmp slt i32 %0, 2, !dbg !50
  br i1 %2, label %11, label %3, !dbg !51

3:                                                ; preds = %1, %3
  %4 = phi i32 [ %8, %3 ], [ %0, %1 ]
  %5 = phi i32 [ %9, %3 ], [ 0, %1 ]
  %6 = add nsw i32 %4, -1, !dbg !52
  %7 = tail call fastcc i32 @fib(i32 noundef %6), !dbg !53
  %8 = add nsw i32 %4, -2, !dbg !54
  %9 = add nsw i32 %7, %5, !dbg !55
  %10 = icmp ult i32 %4, 4, !dbg !50
  br i1 %10, label %11, label %3, !dbg !51

11:                                               ; preds = %3, %1
  %12 = phi i32 [ 0, %1 ], [ %9, %3 ]
  %13 = phi i32 [ %0, %1 ], [ %8, %3 ]
  %14 = add nsw i32 %13, %12, !dbg !55
  ret i32 %14, !dbg !56
}

; Function Attrs: argmemonly mustprogress nofree nosync nounwind willreturn
declare void @llvm.lifetime.end.p0i8(i64 immarg, i8* nocapture) #1

; Function Attrs: nofree nounwind uwtable
define dso_local i32 @main() local_unnamed_addr #3 !dbg !57 {
  %1 = alloca [64 x i32], align 16
  %2 = bitcast [64 x i32]* %1 to i8*, !dbg !58
  call void @llvm.lifetime.start.p0i8(i64 256, i8* nonnull %2) #5, !dbg !58
  %3 = bitcast [64 x i32]* %1 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 0, i32 37, i32 74, i32 111>, <4 x i32>* %3, align 16, !dbg !59, !tbaa !24
  %4 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 4, !dbg !60
  %5 = bitcast i32* %4 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 148, i32 185, i32 222, i32 259>, <4 x i32>* %5, align 16, !dbg !59, !tbaa !24
  %6 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 8, !dbg !60
  %7 = bitcast i32* %6 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 296, i32 333, i32 370, i32 407>, <4 x i32>* %7, align 16, !dbg !59, !tbaa !24
  %8 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 12, !dbg !60
  %9 = bitcast i32* %8 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 444, i32 481, i32 518, i32 555>, <4 x i32>* %9, align 16, !dbg !59, !tbaa !24
  %10 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 16, !dbg !60
  %11 = bitcast i32* %10 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 592, i32 629, i32 666, i32 703>, <4 x i32>* %11, align 16, !dbg !59, !tbaa !24
  %12 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 20, !dbg !60
  %13 = bitcast i32* %12 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 740, i32 777, i32 814, i32 851>, <4 x i32>* %13, align 16, !dbg !59, !tbaa !24
  %14 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 24, !dbg !60
  %15 = bitcast i32* %14 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 888, i32 925, i32 962, i32 999>, <4 x i32>* %15, align 16, !dbg !59, !tbaa !24
  %16 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 28, !dbg !60
  %17 = bitcast i32* %16 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 1036, i32 1073, i32 1110, i32 1147>, <4 x i32>* %17, align 16, !dbg !59, !tbaa !24
  %18 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 32, !dbg !60
  %19 = bitcast i32* %18 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 1184, i32 1221, i32 1258, i32 1295>, <4 x i32>* %19, align 16, !dbg !59, !tbaa !24
  %20 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 36, !dbg !60
  %21 = bitcast i32* %20 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 1332, i32 1369, i32 1406, i32 1443>, <4 x i32>* %21, align 16, !dbg !59, !tbaa !24
  %22 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 40, !dbg !60
  %23 = bitcast i32* %22 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 1480, i32 1517, i32 1554, i32 1591>, <4 x i32>* %23, align 16, !dbg !59, !tbaa !24
  %24 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 44, !dbg !60
  %25 = bitcast i32* %24 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 1628, i32 1665, i32 1702, i32 1739>, <4 x i32>* %25, align 16, !dbg !59, !tbaa !24
  %26 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 48, !dbg !60
  %27 = bitcast i32* %26 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 1776, i32 1813, i32 1850, i32 1887>, <4 x i32>* %27, align 16, !dbg !59, !tbaa !24
  %28 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 52, !dbg !60
  %29 = bitcast i32* %28 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 1924, i32 1961, i32 1998, i32 2035>, <4 x i32>* %29, align 16, !dbg !59, !tbaa !24
  %30 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 56, !dbg !60
  %31 = bitcast i32* %30 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 2072, i32 2109, i32 2146, i32 2183>, <4 x i32>* %31, align 16, !dbg !59, !tbaa !24
  %32 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 60, !dbg !60
  %33 = bitcast i32* %32 to <4 x i32>*, !dbg !59
  store <4 x i32> <i32 2220, i32 2257, i32 2294, i32 2331>, <4 x i32>* %33, align 16, !dbg !59, !tbaa !24
  br label %34, !dbg !61

34:                                               ; preds = %0, %40
  %35 = phi i64 [ %42, %40 ], [ 0, %0 ]
  %36 = phi i32 [ %41, %40 ], [ 0, %0 ]
  %37 = icmp eq i64 %35, 0, !dbg !63
  br i1 %37, label %40, label %38, !dbg !64

38:                                               ; preds = %34
  %39 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 %35
  br label %44, !dbg !64

40:                                               ; preds = %69, %34
  %41 = phi i32 [ %36, %34 ], [ %70, %69 ], !dbg !65
  %42 = add nuw nsw i64 %35, 1, !dbg !66
  %43 = icmp eq i64 %42, 64, !dbg !67
  br i1 %43, label %73, label %34, !dbg !61, !llvm.loop !68

44:                                               ; preds = %69, %38
  %45 = phi i64 [ 0, %38 ], [ %71, %69 ]
  %46 = phi i32 [ %36, %38 ], [ %70, %69 ]
  %47 = getelementptr inbounds [64 x i32], [64 x i32]* %1, i64 0, i64 %45, !dbg !70
  %48 = load i32, i32* %47, align 4, !dbg !70, !tbaa !24
  %49 = and i32 %48, 3, !dbg !71
  switch i32 %49, label %65 [
    i32 0, label %50
    i32 1, label %59
  ], !dbg !72

50:                                               ; preds = %44
  %51 = load i32, i32* %39, align 4, !dbg !73, !tbaa !24
  %52 = add nsw i32 %51, %48, !dbg !74
  %53 = sdiv i32 %52, 2, !dbg !76
  %54 = icmp slt i32 %53, 255, !dbg !77
  %55 = select i1 %54, i32 %53, i32 255, !dbg !77
  %56 = icmp sgt i32 %55, 0, !dbg !77
  %57 = select i1 %56, i32 %55, i32 0, !dbg !77
  %58 = add nsw i32 %57, %46, !dbg !79
  br label %69, !dbg !80

59:                                               ; preds = %44
  %60 = icmp slt i32 %48, 7, !dbg !81
  %61 = select i1 %60, i32 %48, i32 7, !dbg !81
  %62 = icmp sgt i32 %61, 1, !dbg !81
  %63 = select i1 %62, i32 %61, i32 1, !dbg !81
  %64 = sub nsw i32 %46, %63, !dbg !83
  br label %69, !dbg !84

65:                                               ; preds = %44
  %66 = and i32 %48, 7, !dbg !85
  %67 = tail call fastcc i32 @fib(i32 noundef %66) #5, !dbg !86
  %68 = xor i32 %67, %46, !dbg !87
  br label %69, !dbg !69

69:                                               ; preds = %65, %59, %50
  %70 = phi i32 [ %68, %65 ], [ %64, %59 ], [ %58, %50 ], !dbg !65
  %71 = add nuw nsw i64 %45, 1, !dbg !88
  %72 = icmp eq i64 %71, %35, !dbg !63
  br i1 %72, label %40, label %44, !dbg !64, !llvm.loop !89

73:                                               ; preds = %40
  %74 = tail call i32 (i8*, ...) @printf(i8* noundef nonnull dereferenceable(1) getelementptr inbounds ([4 x i8], [4 x i8]* @.str, i64 0, i64 0), i32 noundef %41), !dbg !90
  call void @llvm.lifetime.end.p0i8(i64 256, i8* nonnull %2) #5, !dbg !91
  ret i32 0, !dbg !92
}

; Function Attrs: nofree nounwind
declare noundef i32 @printf(i8* nocapture noundef readonly, ...) local_unnamed_addr #4

attributes #0 = { nofree nosync nounwind readonly uwtable "frame-pointer"="none" "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #1 = { argmemonly mustprogress nofree nosync nounwind willreturn }
attributes #2 = { nofree nosync nounwind readnone uwtable "frame-pointer"="none" "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #3 = { nofree nounwind uwtable "frame-pointer"="none" "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #4 = { nofree nounwind "frame-pointer"="none" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #5 = { nounwind }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7}
!llvm.ident = !{!8}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "Debian clang version 14.0.6", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "small.c", directory: "/tmp/seeds", checksumkind: CSK_MD5, checksum: "4c7d5ac0bbb61774b641c49e5fd9d0df")
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 1, !"wchar_size", i32 4}
!5 = !{i32 7, !"PIC Level", i32 2}
!6 = !{i32 7, !"PIE Level", i32 2}
!7 = !{i32 7, !"uwtable", i32 1}
!8 = !{!"Debian clang version 14.0.6"}
!9 = distinct !DISubprogram(name: "transform", scope: !1, file: !1, line: 5, type: !10, scopeLine: 5, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!10 = !DISubroutineType(types: !11)
!11 = !{}
!12 = !DILocation(line: 7, column: 23, scope: !9)
!13 = !DILocation(line: 7, column: 5, scope: !9)
!14 = !DILocation(line: 8, column: 27, scope: !9)
!15 = !DILocation(line: 8, column: 9, scope: !9)
!16 = !DILocation(line: 6, column: 9, scope: !9)
!17 = !DILocation(line: 14, column: 5, scope: !9)
!18 = !DILocation(line: 0, scope: !9)
!19 = !DILocation(line: 7, column: 29, scope: !9)
!20 = distinct !{!20, !13, !21, !22}
!21 = !DILocation(line: 13, column: 13, scope: !9)
!22 = !{!"llvm.loop.mustprogress"}
!23 = !DILocation(line: 9, column: 21, scope: !9)
!24 = !{!25, !25, i64 0}
!25 = !{!"int", !26, i64 0}
!26 = !{!"omnipotent char", !27, i64 0}
!27 = !{!"Simple C/C++ TBAA"}
!28 = !DILocation(line: 9, column: 27, scope: !9)
!29 = !DILocation(line: 9, column: 13, scope: !9)
!30 = !DILocation(line: 10, column: 32, scope: !9)
!31 = !DILocation(line: 3, column: 50, scope: !32, inlinedAt: !33)
!32 = distinct !DISubprogram(name: "blend", scope: !1, file: !1, line: 3, type: !10, scopeLine: 3, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!33 = distinct !DILocation(line: 10, column: 26, scope: !9)
!34 = !DILocation(line: 3, column: 55, scope: !32, inlinedAt: !33)
!35 = !DILocation(line: 2, column: 50, scope: !36, inlinedAt: !37)
!36 = distinct !DISubprogram(name: "clamp", scope: !1, file: !1, line: 2, type: !10, scopeLine: 2, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!37 = distinct !DILocation(line: 3, column: 41, scope: !32, inlinedAt: !33)
!38 = !DILocation(line: 10, column: 23, scope: !9)
!39 = !DILocation(line: 10, column: 47, scope: !9)
!40 = !DILocation(line: 2, column: 50, scope: !36, inlinedAt: !41)
!41 = distinct !DILocation(line: 11, column: 26, scope: !9)
!42 = !DILocation(line: 11, column: 23, scope: !9)
!43 = !DILocation(line: 11, column: 46, scope: !9)
!44 = !DILocation(line: 12, column: 37, scope: !9)
!45 = !DILocation(line: 12, column: 27, scope: !9)
!46 = !DILocation(line: 12, column: 24, scope: !9)
!47 = !DILocation(line: 8, column: 33, scope: !9)
!48 = distinct !{!48, !15, !21, !22}
!49 = distinct !DISubprogram(name: "fib", scope: !1, file: !1, line: 4, type: !10, scopeLine: 4, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!50 = !DILocation(line: 4, column: 34, scope: !49)
!51 = !DILocation(line: 4, column: 32, scope: !49)
!52 = !DILocation(line: 4, column: 50, scope: !49)
!53 = !DILocation(line: 4, column: 44, scope: !49)
!54 = !DILocation(line: 4, column: 63, scope: !49)
!55 = !DILocation(line: 4, column: 55, scope: !49)
!56 = !DILocation(line: 4, column: 25, scope: !49)
!57 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 16, type: !10, scopeLine: 16, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!58 = !DILocation(line: 17, column: 5, scope: !57)
!59 = !DILocation(line: 18, column: 40, scope: !57)
!60 = !DILocation(line: 18, column: 30, scope: !57)
!61 = !DILocation(line: 7, column: 5, scope: !9, inlinedAt: !62)
!62 = distinct !DILocation(line: 19, column: 20, scope: !57)
!63 = !DILocation(line: 8, column: 27, scope: !9, inlinedAt: !62)
!64 = !DILocation(line: 8, column: 9, scope: !9, inlinedAt: !62)
!65 = !DILocation(line: 0, scope: !9, inlinedAt: !62)
!66 = !DILocation(line: 7, column: 29, scope: !9, inlinedAt: !62)
!67 = !DILocation(line: 7, column: 23, scope: !9, inlinedAt: !62)
!68 = distinct !{!68, !61, !69, !22}
!69 = !DILocation(line: 13, column: 13, scope: !9, inlinedAt: !62)
!70 = !DILocation(line: 9, column: 21, scope: !9, inlinedAt: !62)
!71 = !DILocation(line: 9, column: 27, scope: !9, inlinedAt: !62)
!72 = !DILocation(line: 9, column: 13, scope: !9, inlinedAt: !62)
!73 = !DILocation(line: 10, column: 32, scope: !9, inlinedAt: !62)
!74 = !DILocation(line: 3, column: 50, scope: !32, inlinedAt: !75)
!75 = distinct !DILocation(line: 10, column: 26, scope: !9, inlinedAt: !62)
!76 = !DILocation(line: 3, column: 55, scope: !32, inlinedAt: !75)
!77 = !DILocation(line: 2, column: 50, scope: !36, inlinedAt: !78)
!78 = distinct !DILocation(line: 3, column: 41, scope: !32, inlinedAt: !75)
!79 = !DILocation(line: 10, column: 23, scope: !9, inlinedAt: !62)
!80 = !DILocation(line: 10, column: 47, scope: !9, inlinedAt: !62)
!81 = !DILocation(line: 2, column: 50, scope: !36, inlinedAt: !82)
!82 = distinct !DILocation(line: 11, column: 26, scope: !9, inlinedAt: !62)
!83 = !DILocation(line: 11, column: 23, scope: !9, inlinedAt: !62)
!84 = !DILocation(line: 11, column: 46, scope: !9, inlinedAt: !62)
!85 = !DILocation(line: 12, column: 37, scope: !9, inlinedAt: !62)
!86 = !DILocation(line: 12, column: 27, scope: !9, inlinedAt: !62)
!87 = !DILocation(line: 12, column: 24, scope: !9, inlinedAt: !62)
!88 = !DILocation(line: 8, column: 33, scope: !9, inlinedAt: !62)
!89 = distinct !{!89, !64, !69, !22}
!90 = !DILocation(line: 19, column: 5, scope: !57)
!91 = !DILocation(line: 21, column: 1, scope: !57)
!92 = !DILocation(line: 20, column: 5, scope: !57)
